//! Task admission: what a new task costs its caller and the replica, decided here for every
//! way a task comes to be: a call made a task by its client or its tool's policy, a background
//! tool's call, an `auto` call promoted because it ran long, and a 2025-11-25 call that asked
//! for input.
//!
//! Threat model: a caller who wants more of the fleet than its share (tasks that hold worker
//! slots, Redis memory and upstream capacity for up to their whole lifetime) by choosing the
//! way its tasks come to be. Invariants: every task is created with the caller's quotas
//! (`limits.max_running_tasks`, `max_retained_tasks`, `max_stored_bytes`; checked by the
//! store's create script, so nothing is created over them); every task is charged once to the
//! caller's task rate limits (`limits.tasks_per_minute`, the upstream's task limit): with its
//! call when the call is known to become a task (one round trip with the call's buckets, all
//! or nothing), or when a running call becomes one; a task that runs here at once holds one of
//! the replica's worker slots (`tasks.max_running`) until its run ends, and a running call that
//! finds none free does not become a task. A refusal creates nothing.

use mcpgate_runtime::worker::Slot;
use mcpgate_store::Quota;

use super::TaskService;
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::limits::Charge;

/// How a task comes to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Way<'a> {
    /// Created for its call (the client asked, the tool's policy says so, a background tool),
    /// charged with the call: it runs here at once when a worker slot is free, else anywhere
    /// from the queue.
    Created,
    /// A running call became a task (it asked for input, or ran long): it runs on here, so it
    /// needs a worker slot, and its call was charged as a plain call.
    Adopted {
        /// The upstream of the tool, if any.
        upstream: Option<&'a str>,
    },
}

/// What a `tools/call` is charged before anything runs: the call, and the task it is known to
/// become (`becomes_task`), in one round trip.
pub(crate) fn call_charge(upstream: Option<&str>, becomes_task: bool) -> Charge<'_> {
    Charge::Call { upstream, task: becomes_task }
}

impl TaskService {
    /// Admits a task about to be created `way`: the worker slot it runs on here (always one
    /// for [`Way::Adopted`]) and the charges not yet made; a 503
    /// ([`GatewayError::NoFreeWorker`]) or 429 (a task rate limit) when refused. Quotas are
    /// checked by the creation itself ([`Self::quota`]).
    pub(super) async fn admit(&self, cx: &CallContext, way: Way<'_>) -> Result<Option<Slot>, GatewayError> {
        match way {
            Way::Created => Ok(self.workers.reserve()),
            Way::Adopted { upstream } => {
                // The slot first: it costs no round trip, and a refused charge gives it back.
                let slot = self.workers.reserve().ok_or(GatewayError::NoFreeWorker)?;
                self.limits.admit(&cx.principal, Charge::Task { upstream }).await?;
                Ok(Some(slot))
            }
        }
    }

    /// The caller's task quotas, if any are configured (counted per caller, across sessions),
    /// for every task it creates.
    pub(super) fn quota(&self, cx: &CallContext) -> Option<Quota> {
        let limits = &self.settings.quotas;
        let any = limits.max_running_tasks > 0 || limits.max_retained_tasks > 0 || limits.max_stored_bytes > 0;
        any.then(|| Quota {
            scope: cx.principal.caller_key().to_owned(),
            max_running: limits.max_running_tasks,
            max_retained: limits.max_retained_tasks,
            max_bytes: limits.max_stored_bytes,
        })
    }
}
