//! Load shedding of synchronous calls (SEP-2322's state-only `InputRequiredResult`): a tool
//! that checkpoints while its replica is over its load threshold stops at that checkpoint,
//! and the gateway answers the call with the checkpoint sealed as `requestState` and no input
//! requests; the client's immediate retry (on whichever replica the load balancer picks) gets
//! the checkpoint back as the call's `state` and goes on from there.
//!
//! Invariants: a call is handed off only at a checkpoint the tool chose (so the work it did
//! is never redone), at most once per invocation; only calls whose client can continue with
//! a `requestState` (2026-07-28, not inside a task) get a hand-off at all.

use std::fmt;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// Whether this replica is over its load threshold right now.
type Overloaded = Box<dyn Fn() -> bool + Send + Sync>;

/// A synchronous call's way out to another replica (see the module docs).
#[derive(Clone)]
pub struct HandOff(Arc<Inner>);

struct Inner {
    overloaded: Overloaded,
    checkpoint: Mutex<Option<Value>>,
    requested: CancellationToken,
}

impl fmt::Debug for HandOff {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandOff").field("requested", &self.0.requested.is_cancelled()).finish_non_exhaustive()
    }
}

impl HandOff {
    /// A hand-off taken when `overloaded` says so at a checkpoint.
    pub fn new(overloaded: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(Inner {
            overloaded: Box::new(overloaded),
            checkpoint: Mutex::new(None),
            requested: CancellationToken::new(),
        }))
    }

    /// Offers a checkpoint: true when the call is to be handed off with it (the replica is
    /// over its threshold and no hand-off was taken yet).
    pub(super) fn offer(&self, state: &Value) -> bool {
        if self.0.requested.is_cancelled() || !(self.0.overloaded)() {
            return false;
        }
        // A poisoned lock only means another thread panicked mid-write of the same slot.
        let mut slot = self.0.checkpoint.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *slot = Some(state.clone());
        drop(slot);
        self.0.requested.cancel();
        true
    }

    /// Resolves, with the checkpoint to hand over, once the tool offered one under load.
    pub async fn requested(&self) -> Value {
        self.0.requested.cancelled().await;
        let mut slot = self.0.checkpoint.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        slot.take().unwrap_or(Value::Null)
    }
}
