//! The embedded store: every contract of `TaskStore`, `JobQueue` and `EventBus` kept in this
//! process, for a single replica with no Redis (the default) and for tests.
//!
//! Invariants: one mutex guards all state and is never held across an await, so each
//! operation is atomic; expired tasks are purged (in expiry order) before any operation reads
//! state, so memory is bounded by the live tasks.

mod admin;
mod fleet;
mod pins;
mod rates;
mod state;
mod vault;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use mcpgate_protocol::task::TaskStatus;

use crate::clock::{millis, now_ms, now_us};
use crate::contract::{EventBus, JobQueue, OnceMarks, RateLimits, TaskStore, UpstreamLists};
use crate::error::StoreError;
use crate::events::{Hub, Subscription, Watcher};
use crate::model::{
    Answered, Cancelled, CheckedAnswers, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawRequests, Read,
    Renewal, Settled, StatusNote, TaskEvent, TaskId, TaskOutcome, TaskRecord,
};
use crate::rate::{Admission, Bucket};
use fleet::FleetState;
use pins::PinsState;
use rates::Rates;
use state::State;
use vault::VaultState;

/// The in-process store.
#[derive(Clone)]
pub struct MemoryStore {
    state: Arc<std::sync::Mutex<State>>,
    jobs_ready: Arc<Notify>,
    hub: Hub,
    /// Rate-limit buckets, apart from the task state (a check touches nothing else).
    rates: Arc<std::sync::Mutex<Rates>>,
    /// Vault entries and locks, apart from the task state too.
    vault: Arc<std::sync::Mutex<VaultState>>,
    /// Pinned tool definitions, apart from the rest too.
    pins: Arc<std::sync::Mutex<PinsState>>,
    /// The fleet's heartbeats, apart from the rest too.
    fleet: Arc<std::sync::Mutex<FleetState>>,
}

impl std::fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryStore").finish_non_exhaustive()
    }
}

struct NoWatch;

impl Watcher for NoWatch {
    fn unwatch(&self, _: &TaskId) {}
}

impl MemoryStore {
    /// An empty store with `shards` shards (as ids carry one, like the Redis store's).
    pub fn new(shards: u16) -> Self {
        Self {
            state: Arc::new(std::sync::Mutex::new(State::new(shards))),
            jobs_ready: Arc::new(Notify::new()),
            hub: Hub::new(),
            rates: Arc::default(),
            vault: Arc::default(),
            pins: Arc::default(),
            fleet: Arc::default(),
        }
    }

    /// Jobs waiting in the queue or held by a worker.
    pub fn queue_depth(&self) -> u64 {
        self.with(|s, _| s.queue_depth())
    }

    /// Runs `f` on the state with expired tasks purged, then delivers the events it produced.
    fn with<T>(&self, f: impl FnOnce(&mut State, u64) -> T) -> T {
        let now = now_ms();
        let (value, events) = {
            let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            state.purge(now);
            let value = f(&mut state, now);
            (value, std::mem::take(&mut state.events))
        };
        for (id, event) in events {
            self.hub.deliver(&id, event);
        }
        value
    }
}

impl TaskStore for MemoryStore {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        let created = self.with(|s, now| s.create(task, now))?;
        if matches!(created, Created::New(_)) {
            self.jobs_ready.notify_waiters();
        }
        Ok(created)
    }

    async fn create_running(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> Result<(Created, Option<(Lease, Job)>), StoreError> {
        self.with(|s, now| s.create_running(task, worker, millis(lease), now))
    }

    async fn get(&self, id: &TaskId, read: Read) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.with(|s, _| s.tasks.get(id).map(|e| e.view(read))))
    }

    async fn list(&self, owner: &str, cursor: Option<&ListCursor>, limit: usize) -> Result<Page, StoreError> {
        Ok(self.with(|s, _| s.list(owner, cursor, limit)))
    }

    async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        Ok(self.with(|s, now| s.cancel(id, owner, now)))
    }

    async fn charge(&self, scope: &str, id: &TaskId, bytes: u64) -> Result<(), StoreError> {
        self.with(|s, _| s.charge(scope, id, bytes));
        Ok(())
    }

    async fn claim(&self, job: &Job, worker: &str, lease: Duration, max_attempts: u32) -> Result<Claim, StoreError> {
        Ok(self.with(|s, now| s.claim(job, worker, millis(lease), max_attempts, now)))
    }

    async fn renew(&self, lease: &Lease, duration: Duration, note: Option<&StatusNote>) -> Result<Renewal, StoreError> {
        Ok(self.with(|s, now| s.renew(lease, millis(duration), note, now)))
    }

    async fn hold(
        &self,
        lease: &Lease,
        input_requests: &RawRequests,
        state: Option<Option<&str>>,
    ) -> Result<Renewal, StoreError> {
        Ok(self.with(|s, now| s.hold(lease, input_requests, state, now)))
    }

    async fn checkpoint(&self, lease: &Lease, state: &str) -> Result<Renewal, StoreError> {
        Ok(self.with(|s, _| s.checkpoint(lease, state)))
    }

    async fn finish(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        outcome: TaskOutcome,
        tool_error: bool,
    ) -> Result<Settled, StoreError> {
        Ok(self.with(|s, now| {
            s.settle(lease, job, now, |entry| {
                entry.record.status = status;
                entry.record.outcome = Some(outcome);
                entry.record.tool_error = tool_error;
                // As settle.lua: the last note was a step's, not the ending's.
                entry.record.status_message = None;
                if status == TaskStatus::Completed && entry.record.progress_ppm.is_some() {
                    entry.record.progress_ppm = Some(1_000_000);
                }
            })
        }))
    }

    async fn park(
        &self,
        lease: &Lease,
        job: &Job,
        input_requests: &RawRequests,
        state: Option<&str>,
    ) -> Result<Settled, StoreError> {
        Ok(self.with(|s, now| {
            s.settle(lease, job, now, |entry| {
                entry.record.status = TaskStatus::InputRequired;
                // A run that parks ended cleanly: its attempt is given back, and the state it
                // parks with is a round's continuation, not a checkpoint.
                entry.record.attempts = entry.record.attempts.saturating_sub(1);
                entry.record.resumable = false;
                entry.record.input_requests = input_requests.iter().map(|(k, r)| (k.clone(), r.json.clone())).collect();
                entry.asked = input_requests.iter().map(|(k, r)| (k.clone(), r.method.clone())).collect();
                entry.record.state = state.map(str::to_owned);
            })
        }))
    }

    async fn answer(
        &self,
        id: &TaskId,
        owner: &str,
        answers: &CheckedAnswers,
        max_bytes: u64,
    ) -> Result<Answered, StoreError> {
        let answered = self.with(|s, now| s.answer(id, owner, answers, max_bytes, now));
        if answered == Answered::Resumed {
            self.jobs_ready.notify_waiters();
        }
        Ok(answered)
    }

    async fn release(&self, lease: &Lease, job: &Job) -> Result<Settled, StoreError> {
        let settled = self.with(|s, now| s.release(lease, job, None, now));
        if settled == Settled::Done {
            self.jobs_ready.notify_waiters();
        }
        Ok(settled)
    }

    async fn defer(&self, lease: &Lease, job: &Job, grace: Duration, error: &str) -> Result<Settled, StoreError> {
        let settled = self.with(|s, now| s.release(lease, job, Some((millis(grace), error)), now));
        if settled == Settled::Done {
            self.jobs_ready.notify_waiters();
        }
        Ok(settled)
    }
}

impl JobQueue for MemoryStore {
    async fn read(&self, worker: &str, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        let deadline = tokio::time::Instant::now() + block;
        loop {
            // Register interest before looking, so a job enqueued in between wakes us.
            let notified = self.jobs_ready.notified();
            let jobs = self.with(|s, now| s.take_jobs(worker, max, now));
            if !jobs.is_empty() {
                return Ok(jobs);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    async fn hand_back(&self, jobs: &[Job]) -> Result<(), StoreError> {
        self.with(|s, _| s.hand_back(jobs));
        self.jobs_ready.notify_waiters();
        Ok(())
    }

    async fn ack(&self, job: &Job) -> Result<(), StoreError> {
        self.with(|s, _| s.ack(job));
        Ok(())
    }

    async fn reclaim(&self, worker: &str, idle: Duration, max: usize) -> Result<Vec<Job>, StoreError> {
        Ok(self.with(|s, now| s.reclaim(worker, millis(idle), max, now)))
    }

    /// Workers are not tracked apart from the jobs they hold: nothing to forget.
    // A read here waits in this process and ends with its future: nothing is left in flight.
    async fn stop_reading(&self) {}

    async fn forget_idle_workers(&self, _: Duration) -> Result<usize, StoreError> {
        Ok(0)
    }
}

impl EventBus for MemoryStore {
    async fn subscribe(&self, id: &TaskId) -> Result<Subscription, StoreError> {
        Ok(self.hub.join(id, Arc::new(NoWatch)).0)
    }

    async fn publish(&self, id: &TaskId, event: TaskEvent) -> Result<(), StoreError> {
        self.hub.deliver(id, event);
        Ok(())
    }

    async fn publish_change(&self, change: &crate::change::Change) -> Result<(), StoreError> {
        self.hub.deliver_change(change.clone());
        Ok(())
    }

    fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::change::Change> {
        self.hub.changes()
    }
}

impl OnceMarks for MemoryStore {
    async fn first_use(&self, id: &str, expires_at_ms: u64) -> Result<bool, StoreError> {
        Ok(self.with(|s, _| s.first_use(id, expires_at_ms)))
    }
}

impl RateLimits for MemoryStore {
    async fn admit(&self, scope: &str, buckets: &[Bucket]) -> Result<Admission, StoreError> {
        let now = now_us();
        Ok(self.rates.lock().unwrap_or_else(std::sync::PoisonError::into_inner).admit(scope, buckets, now))
    }
}

impl UpstreamLists for MemoryStore {
    async fn save_lists(&self, upstream: &str, lists: &str) -> Result<u64, StoreError> {
        Ok(self.with(|s, _| {
            s.lists.insert(upstream.to_owned(), lists.to_owned());
            s.lists_generation += 1;
            s.lists_generation
        }))
    }

    async fn load_lists(&self, upstream: &str) -> Result<Option<String>, StoreError> {
        Ok(self.with(|s, _| s.lists.get(upstream).cloned()))
    }

    async fn lists_generation(&self) -> Result<u64, StoreError> {
        Ok(self.with(|s, _| s.lists_generation))
    }
}
