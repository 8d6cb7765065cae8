//! Bounded waits, the one place in the end-to-end tests that polls: `wait_for` (until a
//! condition holds), `settle` (until a value stops changing), `poll_task` (until a task reaches
//! a status) and `eventually!`, plus `wait_for_blocking` for the harness's synchronous start-up.
//! They are the store's shared waits (`mcpgate_store::testing::wait`, which the crates' own
//! tests use) with what end-to-end runs add: fallible probes, a 100 ms interval and
//! `MCPGATE_TEST_PATIENCE`.
//!
//! Invariant: every wait ends by its deadline; one that times out panics naming what it waited
//! for and the last thing it saw. Deadlines are for liveness, never speed: they are generous
//! (the tests share a small machine) and `MCPGATE_TEST_PATIENCE` multiplies them all.

use std::fmt::{Debug, Display};
use std::time::Duration;

use mcpgate_store::testing::wait;
pub use mcpgate_store::testing::wait::{Look, Observed};
use serde_json::{Value, json};
use tokio::time::Instant;

use crate::client::Client;

/// The default bound of a wait: long enough for anything live on a loaded 2-core box.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// Time between two looks at a condition.
const INTERVAL: Duration = Duration::from_millis(100);

/// `within` stretched by `MCPGATE_TEST_PATIENCE` (a factor, default 1) for slower machines.
pub fn patience(within: Duration) -> Duration {
    let factor = std::env::var("MCPGATE_TEST_PATIENCE").ok().and_then(|f| f.parse::<f64>().ok());
    within.mul_f64(factor.filter(|f| f.is_finite() && *f >= 1.0).unwrap_or(1.0))
}

/// Looks at a condition every 100 ms until it holds, and returns what it found then.
///
/// # Panics
///
/// When `within` passes first (saying `what` it waited for and what it saw last), or at once
/// when `probe` fails (a probe maps the failures it expects, e.g. "connection refused" while a
/// server starts, to [`Look::NotYet`] itself).
pub async fn wait_for<O: Observed>(
    what: impl Display,
    within: Duration,
    mut probe: impl AsyncFnMut() -> anyhow::Result<O>,
) -> O::Value {
    let what = what.to_string();
    wait::wait_every(&what, patience(within), INTERVAL, async || {
        probe().await.unwrap_or_else(|e| panic!("waiting for {what}: {e:#}"))
    })
    .await
}

/// [`wait_for`] for synchronous code (the harness's process start-up and exit), sleeping the
/// thread between looks.
///
/// # Panics
///
/// As [`wait_for`].
pub fn wait_for_blocking<O: Observed>(
    what: impl Display,
    within: Duration,
    mut probe: impl FnMut() -> anyhow::Result<O>,
) -> O::Value {
    let what = what.to_string();
    wait::wait_for_blocking(&what, patience(within), INTERVAL / 2, || {
        probe().unwrap_or_else(|e| panic!("waiting for {what}: {e:#}"))
    })
}

/// Reads a value until it has not changed for `quiet` (e.g. a count that must stop growing)
/// and returns it.
///
/// # Panics
///
/// When it still changes after `within`, or at once when `read` fails.
pub async fn settle<V: PartialEq + Debug>(
    what: impl Display,
    quiet: Duration,
    within: Duration,
    mut read: impl AsyncFnMut() -> anyhow::Result<V>,
) -> V {
    let mut last: Option<(V, Instant)> = None;
    wait_for(format!("{what} to stay the same for {quiet:?}"), within, async || {
        let value = read().await?;
        let now = Instant::now();
        Ok(match last.take() {
            Some((before, since)) if before == value && now.duration_since(since) >= quiet => Look::Done(value),
            Some((before, since)) if before == value => {
                let seen = Look::not_yet(&value);
                last = Some((before, since));
                seen
            }
            _ => {
                let seen = Look::not_yet(&value);
                last = Some((value, now));
                seen
            }
        })
    })
    .await
}

/// Asserts that a condition eventually holds (polled, bounded by [`PATIENCE`] or by
/// `within = ...`); the condition may `.await` and use `?` (the error fails the test at once).
///
/// ```text
/// eventually!(status_of(&client, &url, &id).await? == "completed", "task {id} completes");
/// eventually!(within = Duration::from_secs(60), path.exists(), "{} appears", path.display());
/// ```
#[macro_export]
macro_rules! eventually {
    (within = $within:expr, $cond:expr, $($what:tt)+) => {
        $crate::wait_for(format!($($what)+), $within, async || -> ::anyhow::Result<bool> { Ok($cond) }).await
    };
    ($cond:expr, $($what:tt)+) => {
        $crate::eventually!(within = $crate::PATIENCE, $cond, $($what)+)
    };
}

/// The status [`poll_task`] waits for.
#[derive(Debug, Clone, Copy)]
pub enum Until<'a> {
    /// Exactly this status (`working`, `input_required`, ...).
    Status(&'a str),
    /// `completed`, `failed` or `cancelled`.
    Terminal,
}

impl Until<'_> {
    fn reached(self, status: &str) -> bool {
        match self {
            Self::Status(want) => status == want,
            Self::Terminal => ["completed", "failed", "cancelled"].contains(&status),
        }
    }
}

impl Display for Until<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Status(status) => write!(f, "status {status}"),
            Self::Terminal => f.write_str("a terminal status"),
        }
    }
}

/// How `tasks/get` is sent while polling: by default a 2026-07-28 request declaring the tasks
/// extension, without credentials, always to the same URL.
#[derive(Debug, Clone)]
pub struct TaskPoll<'a> {
    client: &'a Client,
    urls: Vec<String>,
    headers: Vec<(&'a str, &'a str)>,
    session: Option<&'a str>,
    within: Duration,
}

impl<'a> TaskPoll<'a> {
    /// Polls through `url`.
    pub fn new(client: &'a Client, url: &str) -> Self {
        Self { client, urls: vec![url.to_owned()], headers: Vec::new(), session: None, within: PATIENCE }
    }

    /// Polls through each of `urls` in turn (a different replica each time).
    pub fn rotating(client: &'a Client, urls: &[String]) -> Self {
        Self { urls: urls.to_vec(), ..Self::new(client, "") }
    }

    /// Sends `authorization` with every poll.
    pub fn auth(mut self, authorization: &'a str) -> Self {
        self.headers.push(("authorization", authorization));
        self
    }

    /// Polls as a 2025-11-25 client in `session`.
    pub fn legacy(mut self, session: &'a str) -> Self {
        self.session = Some(session);
        self
    }

    /// Bounds the wait by `within` instead of [`PATIENCE`].
    pub fn within(mut self, within: Duration) -> Self {
        self.within = within;
        self
    }

    /// Polls until the task's status is `until`; returns the task (the reply's `result`).
    ///
    /// # Panics
    ///
    /// When it does not get there in time (naming the task and its last reply), or at once
    /// when a request fails.
    pub async fn until(&self, id: &str, until: Until<'_>) -> Value {
        let mut turn = 0;
        let what = format!("task {id} to reach {until}");
        wait_for(what, self.within, async || {
            let url = &self.urls[turn % self.urls.len()];
            turn += 1;
            let reply = match self.session {
                Some(session) => {
                    let params = json!({"taskId": id});
                    self.client.legacy_with(url, &self.headers, "tasks/get", params, Some(session)).await?
                }
                None => {
                    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
                    let params = json!({"taskId": id, "_meta": {"io.modelcontextprotocol/clientCapabilities": caps}});
                    self.client.modern_with(url, &self.headers, "tasks/get", params).await?
                }
            };
            let reply = reply.json()?;
            let task = &reply["result"];
            Ok(match task["status"].as_str() {
                Some(status) if until.reached(status) => Look::Done(task.clone()),
                _ => Look::NotYet(reply.to_string()),
            })
        })
        .await
    }
}

/// Polls `tasks/get` at `url` (2026-07-28, tasks extension declared) until the task's status
/// is `until`; returns the task. See [`TaskPoll`] for credentials, sessions and other bounds.
///
/// # Panics
///
/// As [`TaskPoll::until`].
pub async fn poll_task(client: &Client, url: &str, id: &str, until: Until<'_>) -> Value {
    TaskPoll::new(client, url).until(id, until).await
}
