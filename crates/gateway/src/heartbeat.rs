//! This replica's heartbeat: every [`BEAT`] it records in the store who it is (the id its
//! seal key ring record uses), its version, a hash of its configuration, when it started,
//! the tasks running on it and whether it drains, so any replica can show the live fleet
//! (`GET /admin/fleet`). A record lives [`LIVE`] (three missed beats); the replica removes
//! it when it stops.
//!
//! What it says of itself that does not change while it runs is its [`Member`](crate::member::Member).

use std::time::Duration;

use crate::state::AppState;
use mcpgate_store::{Fleet as _, Heartbeat};

/// How often a replica writes its heartbeat.
pub(crate) const BEAT: Duration = Duration::from_secs(5);

/// How long a heartbeat lives unrefreshed: three missed beats.
pub(crate) const LIVE: Duration = Duration::from_secs(15);

/// Writes this replica's heartbeat now (also right after a drain, so the fleet sees it at
/// once). A failure is logged: the next beat tries again.
pub(crate) async fn beat(state: &AppState) {
    let member = &state.member;
    let workers = state.tasks.workers();
    let beat = Heartbeat {
        replica: member.replica.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        config_hash: member.config_hash.clone(),
        started_ms: member.started_ms,
        tasks_running: u64::try_from(workers.running()).unwrap_or(u64::MAX),
        draining: workers.is_draining(),
        written_ms: 0,
    };
    match state.store.beat(&beat, LIVE).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!("the store lists as many replicas as it holds: this one is not listed"),
        Err(e) => {
            tracing::debug!(error = &e as &dyn std::error::Error, "writing this replica's heartbeat failed; retried")
        }
    }
}

/// Writes the heartbeat every [`BEAT`] until the replica starts stopping, then removes it
/// (on the state's tracker, which shutdown waits for, so the removal is done before the
/// process exits).
pub(crate) fn spawn(state: AppState) {
    let tracker = state.in_flight.clone();
    tracker.spawn(async move {
        loop {
            beat(&state).await;
            tokio::select! {
                () = tokio::time::sleep(BEAT) => {}
                () = state.stopping.cancelled() => break,
            }
        }
        if let Err(e) = state.store.leave(&state.member.replica).await {
            tracing::debug!(
                error = &e as &dyn std::error::Error,
                "removing this replica's heartbeat failed; it lapses"
            );
        }
    });
}
