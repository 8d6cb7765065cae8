//! The embedded store's job queue: jobs waiting in order, and those read by a worker and not
//! yet acknowledged (pending), which a reclaim hands to another worker once idle for long
//! enough, as a Redis consumer group's pending list does.

use super::State;
use crate::model::{Job, TaskId};

/// A job read by a worker and not acknowledged yet.
pub(super) struct Pending {
    pub(super) job: Job,
    /// The worker holding it.
    pub(super) worker: String,
    /// When it was last delivered or renewed (ms): what a reclaim measures idleness from.
    pub(super) delivered: u64,
}

impl State {
    /// Appends a job for `task` (a fresh entry id, as `XADD` gives one).
    pub(super) fn enqueue(&mut self, task: TaskId) {
        self.next_entry += 1;
        self.queue.push_back(Job { task, entry: format!("{}-0", self.next_entry) });
    }

    /// Puts read but unclaimed jobs back at the front of the queue.
    pub(in crate::memory) fn hand_back(&mut self, jobs: &[Job]) {
        for job in jobs.iter().rev() {
            if self.pending.remove(&job.entry).is_some() {
                self.next_entry += 1;
                self.queue.push_front(Job { task: job.task.clone(), entry: format!("{}-0", self.next_entry) });
            }
        }
    }

    pub(in crate::memory) fn queue_depth(&self) -> u64 {
        u64::try_from(self.queue.len() + self.pending.len()).unwrap_or(u64::MAX)
    }

    pub(in crate::memory) fn take_jobs(&mut self, worker: &str, max: usize, now: u64) -> Vec<Job> {
        let n = max.min(self.queue.len());
        let jobs: Vec<Job> = self.queue.drain(..n).collect();
        for job in &jobs {
            self.pending
                .insert(job.entry.clone(), Pending { job: job.clone(), worker: worker.to_owned(), delivered: now });
        }
        jobs
    }

    pub(in crate::memory) fn ack(&mut self, job: &Job) {
        self.pending.remove(&job.entry);
    }

    pub(in crate::memory) fn reclaim(&mut self, worker: &str, idle: u64, max: usize, now: u64) -> Vec<Job> {
        let mut jobs = Vec::new();
        for pending in self.pending.values_mut() {
            if jobs.len() == max {
                break;
            }
            if now.saturating_sub(pending.delivered) >= idle {
                pending.worker = worker.to_owned();
                pending.delivered = now;
                jobs.push(pending.job.clone());
            }
        }
        jobs
    }
}
