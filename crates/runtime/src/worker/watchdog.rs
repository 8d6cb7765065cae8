//! The watchdog of one run: renews the lease (writing the latest status message, at most once
//! a second), listens for the task's events, and says when the run must stop.
//!
//! Invariant: the run is stopped before its lease can lapse. The lease is known to last until
//! `lease` after the *sending* of the last renewal that was confirmed (Redis extends it from
//! its own later clock), so while renewals fail the watchdog stops the run a margin before
//! that instant, never after: another replica can only claim the task once the lease has
//! lapsed and the job has been idle for a whole lease.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{Lease, Renewal, StatusNote, Subscription, TaskEvent, TaskStore as _};

use super::Shared;

/// Why a run must stop before its tool finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    /// The task was cancelled (or otherwise ended elsewhere).
    Cancelled,
    /// The task expired.
    Gone,
    /// Another worker holds the task now.
    Lost,
    /// This replica is shutting down.
    Shutdown,
    /// Renewals failed and the lease is about to lapse: stop before another worker may start.
    LeaseEnding,
}

/// How long before the lease's known end a run whose renewals fail is stopped: a tenth of the
/// lease, at most a second (the time the tool gets to notice its cancellation and the
/// abandoned future to drop).
fn stop_margin(lease: Duration) -> Duration {
    (lease / 10).min(Duration::from_secs(1))
}

/// Least time between two status-message writes.
const MESSAGE_EVERY: Duration = Duration::from_secs(1);
/// Retry interval of a failed renewal.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// Once a task's lifetime is over by our clock, how often the store is asked whether it is.
const EXPIRY_RECHECK: Duration = Duration::from_secs(1);

/// Runs until the run must stop; never returns while the run may go on.
pub(super) async fn watch(
    shared: &Shared,
    lease: &Lease,
    mut status: watch::Receiver<Option<StatusNote>>,
    mut events: Option<Subscription>,
    mut expires: Option<Instant>,
    held_until: Instant,
) -> Stop {
    let (store, duration, shutdown) = (&shared.store, shared.options.lease, &shared.shutdown);
    let margin = stop_margin(duration);
    // The last instant the run may go on without a confirmed renewal.
    let mut stop_at = held_until - margin;
    let renew_every = duration / 3;
    let mut next_renew = Instant::now() + renew_every;
    let mut written: Option<StatusNote> = None;
    let mut last_write = Instant::now();
    let mut messages_open = true;
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return Stop::Shutdown,
            () = sleep_until(stop_at) => return Stop::LeaseEnding,
            event = next_event(&mut events) => match event {
                TaskEvent::Status(TaskStatus::Cancelled) => return Stop::Cancelled,
                TaskEvent::Status(s) if s.is_terminal() => return Stop::Cancelled,
                // We may have missed a cancellation: ask the store now.
                TaskEvent::Resync => {}
                TaskEvent::Status(_) => continue,
            },
            () = sleep_until(next_renew) => {}
            // At the task's expiry ask the store (its clock decides), then every second.
            () = sleep_until_some(expires) => expires = Some(Instant::now() + EXPIRY_RECHECK),
            changed = status.changed(), if messages_open => {
                if changed.is_err() {
                    messages_open = false;
                    continue;
                }
                let earliest = last_write + MESSAGE_EVERY;
                if Instant::now() < earliest {
                    next_renew = next_renew.min(earliest);
                    continue;
                }
            }
        }
        let message = status.borrow().clone();
        let fresh = message.is_some() && message != written;
        let sent = Instant::now();
        // A renewal that hangs must not carry the run past its lease.
        let renewed = tokio::select! {
            renewed = store.renew(lease, duration, if fresh { message.as_ref() } else { None }) => renewed,
            () = sleep_until(stop_at) => return Stop::LeaseEnding,
            () = shutdown.cancelled() => return Stop::Shutdown,
        };
        match renewed {
            Ok(Renewal::Held) => {
                if fresh {
                    written = message;
                    last_write = Instant::now();
                }
                stop_at = sent + duration - margin;
                next_renew = Instant::now() + renew_every;
            }
            Ok(Renewal::Cancelled) => return Stop::Cancelled,
            Ok(Renewal::Gone) => return Stop::Gone,
            Ok(Renewal::Lost) => return Stop::Lost,
            Err(e) => {
                // The lease runs on; if it lapses meanwhile, the next renewal says Lost.
                shared.options.metrics.renew_failure();
                tracing::warn!(task = %lease.task, error = &e as &dyn std::error::Error, "renewing a lease failed");
                next_renew = Instant::now() + RETRY_EVERY;
            }
        }
    }
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The next event, or never when there is no subscription (renewals still catch cancels).
async fn next_event(events: &mut Option<Subscription>) -> TaskEvent {
    match events {
        Some(sub) => sub.next().await,
        None => std::future::pending().await,
    }
}
