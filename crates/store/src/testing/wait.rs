//! Bounded waits, the one place the crates' own tests (and, through its `wait` module, the
//! end-to-end harness) poll: [`wait_for`] looks at a condition until it holds, in async code on
//! tokio's clock; [`wait_for_blocking`] and [`try_wait_for_blocking`] do the same for the
//! synchronous harnesses (a process start-up, a failover seen through `redis-cli`).
//!
//! Invariant: every wait ends by its bound; one that times out panics naming what it waited for
//! and the last thing it saw (the `try_` wait hands that back instead). The async wait runs on tokio's clock, so under paused time
//! (`start_paused = true`) it advances with the test instead of sleeping for real.

use std::fmt::{Debug, Display};
use std::time::Duration;

use tokio::time::Instant;

/// Time between two looks at a condition, unless a wait names its own.
pub const EVERY: Duration = Duration::from_millis(20);

/// What one look at a condition found.
#[derive(Debug)]
pub enum Look<T> {
    /// It holds; the wait returns this.
    Done(T),
    /// Not yet; what was seen instead (shown if the wait times out).
    NotYet(String),
}

impl<T> Look<T> {
    /// Not yet, having seen `seen`.
    pub fn not_yet(seen: impl Debug) -> Self {
        Self::NotYet(format!("{seen:?}"))
    }
}

/// What a probe may return: a [`Look`], a `bool` (holds or not) or an `Option` (a value once
/// there is one).
pub trait Observed {
    /// What the wait returns once the condition holds.
    type Value;
    /// This observation as a [`Look`].
    fn look(self) -> Look<Self::Value>;
}

impl<T> Observed for Look<T> {
    type Value = T;
    fn look(self) -> Look<T> {
        self
    }
}

impl Observed for bool {
    type Value = ();
    fn look(self) -> Look<()> {
        if self { Look::Done(()) } else { Look::NotYet("false".to_owned()) }
    }
}

impl<T> Observed for Option<T> {
    type Value = T;
    fn look(self) -> Look<T> {
        self.map_or_else(|| Look::NotYet("nothing yet".to_owned()), Look::Done)
    }
}

/// Looks at a condition every [`EVERY`] until it holds, and returns what it found then.
///
/// # Panics
///
/// When `within` passes first, saying `what` it waited for and what it saw last. A probe that
/// meets an unexpected failure panics itself; one it expects (a store still reconnecting) it
/// reports as [`Look::NotYet`].
pub async fn wait_for<O: Observed>(what: impl Display, within: Duration, probe: impl AsyncFnMut() -> O) -> O::Value {
    wait_every(what, within, EVERY, probe).await
}

/// [`wait_for`], looking every `every` (zero for a probe that itself blocks for a while, such
/// as a job read with a block time).
///
/// # Panics
///
/// As [`wait_for`].
pub async fn wait_every<O: Observed>(
    what: impl Display,
    within: Duration,
    every: Duration,
    mut probe: impl AsyncFnMut() -> O,
) -> O::Value {
    let deadline = Instant::now() + within;
    loop {
        match probe().await.look() {
            Look::Done(value) => return value,
            Look::NotYet(seen) if Instant::now() >= deadline => {
                panic!("waited {within:?} for {what}; last seen: {seen}")
            }
            Look::NotYet(_) => {}
        }
        if !every.is_zero() {
            tokio::time::sleep(every).await;
        }
    }
}

/// [`wait_every`] for synchronous code (the Redis harnesses, which drive `redis-cli` and child
/// processes), sleeping the thread between looks.
///
/// # Panics
///
/// As [`wait_for`].
pub fn wait_for_blocking<O: Observed>(
    what: impl Display,
    within: Duration,
    every: Duration,
    probe: impl FnMut() -> O,
) -> O::Value {
    try_wait_for_blocking(within, every, probe)
        .unwrap_or_else(|seen| panic!("waited {within:?} for {what}; last seen: {seen}"))
}

/// [`wait_for_blocking`] for a caller that cleans up or tries again when the wait times out (a
/// child process to kill, another port to try): the last thing seen is the error.
///
/// # Errors
///
/// What the probe saw last, when `within` passes before the condition holds.
pub fn try_wait_for_blocking<O: Observed>(
    within: Duration,
    every: Duration,
    mut probe: impl FnMut() -> O,
) -> Result<O::Value, String> {
    let deadline = Instant::now() + within;
    loop {
        match probe().look() {
            Look::Done(value) => return Ok(value),
            Look::NotYet(seen) if Instant::now() >= deadline => return Err(seen),
            Look::NotYet(_) => {}
        }
        std::thread::sleep(every);
    }
}
