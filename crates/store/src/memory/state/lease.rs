//! A run's transitions in the embedded store, each under its lease: claim (a new lease and
//! fencing token), renew, hold (ask for input in place), checkpoint, settle (finish or park)
//! and release (give back, or defer when its tool is unknown here).

use serde_json::json;

use mcpgate_protocol::task::TaskStatus;

use super::{Entry, State};
use crate::model::{Claim, Job, Lease, Renewal, Settled, Skip, StatusNote, TaskEvent, TaskOutcome};

/// Most dead-lettered jobs kept in memory.
const MAX_DEAD: usize = 1000;

impl State {
    pub(in crate::memory) fn claim(
        &mut self,
        job: &Job,
        worker: &str,
        lease: u64,
        max_attempts: u32,
        now: u64,
    ) -> Claim {
        let Some(entry) = self.tasks.get_mut(&job.task) else {
            self.ack(job);
            return Claim::Skip(Skip::Gone);
        };
        match entry.record.status {
            s if s.is_terminal() => {
                self.ack(job);
                return Claim::Skip(Skip::Terminal);
            }
            TaskStatus::InputRequired => {
                self.ack(job);
                return Claim::Skip(Skip::Parked);
            }
            _ => {}
        }
        if entry.lease_until > now {
            return Claim::Skip(Skip::Busy);
        }
        entry.record.attempts += 1;
        if entry.record.attempts > max_attempts {
            let attempts = entry.record.attempts - 1;
            entry.record.status = TaskStatus::Failed;
            entry.record.status_message = Some(format!("Failed: no attempt finished ({attempts} tried)"));
            entry.record.outcome = Some(TaskOutcome::Error(exhausted_error(attempts)));
            entry.record.updated_ms = now;
            let tool = entry.record.tool.clone();
            self.events.push((job.task.clone(), TaskEvent::Status(TaskStatus::Failed)));
            self.ack(job);
            if self.dead.len() == MAX_DEAD {
                self.dead.pop_front();
            }
            self.dead.push_back(job.clone());
            return Claim::Exhausted { tool };
        }
        entry.lease_token += 1;
        entry.lease_until = now.saturating_add(lease);
        Claim::Run {
            lease: Lease {
                task: job.task.clone(),
                token: entry.lease_token,
                entry: job.entry.clone(),
                worker: worker.to_owned(),
                binding: mcpgate_seal::RecordBinding::default(),
            },
            task: Box::new(entry.record.clone()),
        }
    }

    pub(in crate::memory) fn hold(
        &mut self,
        lease: &Lease,
        requests: &crate::model::RawRequests,
        state: Option<Option<&str>>,
        now: u64,
    ) -> Renewal {
        let Some(entry) = self.tasks.get_mut(&lease.task) else { return Renewal::Gone };
        if entry.record.status == TaskStatus::Cancelled {
            return Renewal::Cancelled;
        }
        if entry.lease_token != lease.token || entry.record.status != TaskStatus::Working {
            return Renewal::Lost;
        }
        entry.record.status = TaskStatus::InputRequired;
        entry.record.input_requests = requests.iter().map(|(k, r)| (k.clone(), r.json.clone())).collect();
        entry.asked = requests.iter().map(|(k, r)| (k.clone(), r.method.clone())).collect();
        entry.record.updated_ms = now;
        if let Some(state) = state {
            entry.record.state = state.map(str::to_owned);
            entry.record.resumable = false;
        }
        self.events.push((lease.task.clone(), TaskEvent::Status(TaskStatus::InputRequired)));
        Renewal::Held
    }

    pub(in crate::memory) fn checkpoint(&mut self, lease: &Lease, state: &str) -> Renewal {
        let Some(entry) = self.tasks.get_mut(&lease.task) else { return Renewal::Gone };
        if entry.record.status == TaskStatus::Cancelled {
            return Renewal::Cancelled;
        }
        if entry.lease_token != lease.token || entry.record.status != TaskStatus::Working {
            return Renewal::Lost;
        }
        entry.record.state = Some(state.to_owned());
        entry.record.resumable = true;
        Renewal::Held
    }

    pub(in crate::memory) fn renew(
        &mut self,
        lease: &Lease,
        duration: u64,
        note: Option<&StatusNote>,
        now: u64,
    ) -> Renewal {
        let Some(entry) = self.tasks.get_mut(&lease.task) else { return Renewal::Gone };
        if entry.record.status == TaskStatus::Cancelled {
            return Renewal::Cancelled;
        }
        if entry.lease_token != lease.token || entry.record.status.is_terminal() {
            return Renewal::Lost;
        }
        entry.lease_until = now.saturating_add(duration);
        if let Some(note) = note
            && (entry.record.status_message.as_deref() != Some(note.message.as_str())
                || entry.record.progress_ppm != note.progress_ppm)
        {
            entry.record.status_message = Some(note.message.clone());
            // A note without a fraction leaves the last one known.
            entry.record.progress_ppm = note.progress_ppm.or(entry.record.progress_ppm);
            entry.record.updated_ms = now;
        }
        // Like XCLAIM in Redis: a renewed job is not idle, so reclaim scans skip it.
        if let Some(pending) = self.pending.get_mut(&lease.entry) {
            pending.worker.clone_from(&lease.worker);
            pending.delivered = now;
        }
        Renewal::Held
    }

    /// The common shape of `finish` and `park`: only with the current lease, only from a
    /// non-terminal status; acknowledges the job unless the lease was superseded.
    pub(in crate::memory) fn settle(
        &mut self,
        lease: &Lease,
        job: &Job,
        now: u64,
        apply: impl FnOnce(&mut Entry),
    ) -> Settled {
        let Some(entry) = self.tasks.get_mut(&lease.task) else {
            self.ack(job);
            return Settled::Gone;
        };
        if entry.record.status.is_terminal() {
            self.ack(job);
            return Settled::AlreadyTerminal;
        }
        if entry.lease_token != lease.token {
            return Settled::Lost;
        }
        if entry.lease_until == 0 {
            // This lease already settled (a repeat): nothing more to write.
            self.ack(job);
            return Settled::Done;
        }
        apply(&mut *entry);
        entry.record.updated_ms = now;
        entry.lease_until = 0;
        let status = entry.record.status;
        self.events.push((lease.task.clone(), TaskEvent::Status(status)));
        self.ack(job);
        Settled::Done
    }

    /// Gives a running task back (see `TaskStore::release`), or, with `defer` (grace ms and
    /// the error to fail with), one this worker cannot run (see `TaskStore::defer`).
    pub(in crate::memory) fn release(
        &mut self,
        lease: &Lease,
        job: &Job,
        defer: Option<(u64, &str)>,
        now: u64,
    ) -> Settled {
        let Some(entry) = self.tasks.get_mut(&lease.task) else {
            self.ack(job);
            return Settled::Gone;
        };
        if entry.lease_token != lease.token {
            return Settled::Lost;
        }
        if entry.record.status == TaskStatus::InputRequired && defer.is_none() {
            // Held (asking in place): it now waits like a parked task.
            entry.lease_until = 0;
            entry.record.attempts = entry.record.attempts.saturating_sub(1);
            self.ack(job);
            return Settled::Done;
        }
        if entry.record.status != TaskStatus::Working {
            self.ack(job);
            return Settled::AlreadyTerminal;
        }
        entry.lease_until = 0;
        if let Some((grace, error)) = defer {
            let since = *entry.deferred_since.get_or_insert(now);
            if now.saturating_sub(since) >= grace {
                entry.record.status = TaskStatus::Failed;
                entry.record.outcome = Some(TaskOutcome::Error(error.to_owned()));
                entry.record.status_message = Some("Failed: no replica can run its tool".to_owned());
                entry.record.updated_ms = now;
                self.events.push((lease.task.clone(), TaskEvent::Status(TaskStatus::Failed)));
                self.ack(job);
                return Settled::GaveUp;
            }
        }
        entry.record.attempts = entry.record.attempts.saturating_sub(1);
        self.ack(job);
        self.enqueue(lease.task.clone());
        Settled::Done
    }
}

/// The error a task ends with when no attempt finished.
fn exhausted_error(attempts: u32) -> String {
    json!({
        "code": -32603,
        "message": format!("Task failed: its executor stopped before finishing, {attempts} times"),
    })
    .to_string()
}
