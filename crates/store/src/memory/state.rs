//! The state of the embedded store and its transitions, as plain synchronous code run under
//! the store's lock.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use serde_json::json;

use mcpgate_protocol::task::TaskStatus;

use crate::error::StoreError;
use crate::model::{
    Answered, Cancelled, CheckedAnswers, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawAnswer, Read,
    Renewal, Settled, Skip, StatusNote, TaskEvent, TaskId, TaskOutcome, TaskRecord,
};
use crate::quota::{Quota, QuotaKind};

/// Most dead-lettered jobs kept in memory.
const MAX_DEAD: usize = 1000;

pub(super) struct Entry {
    pub(super) record: TaskRecord,
    lease_token: u64,
    lease_until: u64,
    /// The method each outstanding input request asks.
    pub(super) asked: std::collections::BTreeMap<String, String>,
    /// Bytes of the answers recorded so far.
    answer_bytes: u64,
    /// What a bytes quota counts for this task (see [`crate::quota::Quota::max_bytes`]).
    stored_bytes: u64,
    /// When a worker first gave the task back for not knowing its tool.
    deferred_since: Option<u64>,
}

impl Entry {
    /// The record as a read of `read` sees it.
    pub(super) fn view(&self, read: Read) -> TaskRecord {
        let r = &self.record;
        if read == Read::Full {
            return r.clone();
        }
        TaskRecord {
            id: r.id.clone(),
            owner: r.owner.clone(),
            issuer: r.issuer.clone(),
            subject: r.subject.clone(),
            era: r.era,
            tool: r.tool.clone(),
            arguments: String::new(),
            capabilities: String::new(),
            scopes: r.scopes.clone(),
            status: r.status,
            status_message: r.status_message.clone(),
            progress_ppm: r.progress_ppm,
            created_ms: r.created_ms,
            updated_ms: r.updated_ms,
            ttl_ms: r.ttl_ms,
            poll_interval_ms: r.poll_interval_ms,
            outcome: if read == Read::WithOutcome { r.outcome.clone() } else { None },
            tool_error: r.tool_error,
            attempts: r.attempts,
            resumable: r.resumable,
            input_requests: r.input_requests.clone(),
            state: None,
            input_responses: crate::model::RawAnswers::new(),
            credential: None,
            trace: None,
            server: r.server.clone(),
        }
    }
}

struct Pending {
    job: Job,
    worker: String,
    delivered: u64,
}

pub(super) struct State {
    shards: u16,
    pub(super) tasks: HashMap<TaskId, Entry>,
    pub(super) expiries: BTreeSet<(u64, TaskId)>,
    /// Scope digest → (task, call digest, end of the window).
    idempotency: HashMap<[u8; 32], (TaskId, [u8; 32], u64)>,
    idempotency_order: VecDeque<(u64, [u8; 32])>,
    pub(super) owners: HashMap<String, BTreeSet<(u64, TaskId)>>,
    queue: VecDeque<Job>,
    pending: HashMap<String, Pending>,
    /// Upstream lists by upstream name, and their generation.
    pub(super) lists: HashMap<String, String>,
    pub(super) lists_generation: u64,
    dead: VecDeque<Job>,
    once: HashMap<String, u64>,
    once_order: BinaryHeap<Reverse<(u64, String)>>,
    /// Caller scope → the tasks counted against its quotas (pruned when checked).
    quotas: HashMap<String, Vec<TaskId>>,
    next_entry: u64,
    /// Events produced by the current operation, delivered after the lock is released.
    pub(super) events: Vec<(TaskId, TaskEvent)>,
}

impl State {
    pub(super) fn new(shards: u16) -> Self {
        Self {
            shards: shards.max(1),
            tasks: HashMap::new(),
            expiries: BTreeSet::new(),
            idempotency: HashMap::new(),
            idempotency_order: VecDeque::new(),
            owners: HashMap::new(),
            queue: VecDeque::new(),
            pending: HashMap::new(),
            lists: HashMap::new(),
            lists_generation: 0,
            dead: VecDeque::new(),
            once: HashMap::new(),
            once_order: BinaryHeap::new(),
            quotas: HashMap::new(),
            next_entry: 0,
            events: Vec::new(),
        }
    }

    /// Drops tasks whose lifetime has ended and idempotency entries past their window.
    pub(super) fn purge(&mut self, now: u64) {
        while let Some((at, id)) = self.expiries.first().cloned() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            if let Some(entry) = self.tasks.remove(&id)
                && let Some(index) = self.owners.get_mut(&entry.record.owner)
            {
                index.remove(&(entry.record.created_ms, id));
                if index.is_empty() {
                    self.owners.remove(&entry.record.owner);
                }
            }
        }
        while let Some(Reverse((at, _))) = self.once_order.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, id))) = self.once_order.pop() {
                self.once.remove(&id);
            }
        }
        while let Some((at, digest)) = self.idempotency_order.front().copied() {
            if at > now {
                break;
            }
            self.idempotency_order.pop_front();
            if self.idempotency.get(&digest).is_some_and(|(_, _, exp)| *exp <= now) {
                self.idempotency.remove(&digest);
            }
        }
    }

    pub(super) fn create(&mut self, task: NewTask, now: u64) -> Result<Created, StoreError> {
        if let Some(idempotency) = &task.idempotency
            && let Some((id, call, _)) = self.idempotency.get(&idempotency.scope)
            && let Some(entry) = self.tasks.get(id)
        {
            if *call != idempotency.call {
                return Ok(Created::KeyReused);
            }
            return Ok(Created::Existing(entry.view(Read::Control)));
        }
        if let Some(quota) = task.quota.as_ref().filter(|q| q.is_limited()) {
            self.check_quota(quota, task.payload_bytes(), now)?;
        }
        let shard = match &task.idempotency {
            Some(i) => u16::from(i.scope[0]) % self.shards,
            None => rand::random_range(0..self.shards),
        };
        let id = TaskId::generate(u8::try_from(shard).unwrap_or(0));
        let (ttl_ms, idempotency, task_indexed) = (task.ttl_ms, task.idempotency.clone(), task.indexed);
        let task_quota = task.quota.clone().filter(Quota::is_limited);
        let answer_bytes = task.input_responses.values().map(|a| a.json.len() as u64).sum();
        let stored_bytes = task.payload_bytes();
        let record = task.into_record(id.clone(), now);
        if let Some(ttl) = ttl_ms {
            self.expiries.insert((now.saturating_add(ttl), id.clone()));
        }
        if task_indexed {
            self.owners.entry(record.owner.clone()).or_default().insert((now, id.clone()));
        }
        if let Some(idempotency) = idempotency {
            let window = ttl_ms.map_or(idempotency.window_ms, |ttl| ttl.min(idempotency.window_ms));
            if window > 0 {
                let expires = now.saturating_add(window);
                self.idempotency.insert(idempotency.scope, (id.clone(), idempotency.call, expires));
                self.idempotency_order.push_back((expires, idempotency.scope));
            }
        }
        self.enqueue(id.clone());
        let entry = Entry {
            record: record.clone(),
            lease_token: 0,
            lease_until: 0,
            asked: std::collections::BTreeMap::new(),
            answer_bytes,
            stored_bytes,
            deferred_since: None,
        };
        if let Some(quota) = task_quota {
            self.quotas.entry(quota.scope).or_default().push(id.clone());
        }
        self.tasks.insert(id, entry);
        Ok(Created::New(record))
    }

    /// Fails when the caller of `quota` is at one of its quotas (tasks that ended no longer
    /// count as running, expired ones not at all).
    fn check_quota(&mut self, quota: &Quota, bytes: u64, now: u64) -> Result<(), StoreError> {
        let Some(ids) = self.quotas.get_mut(&quota.scope) else { return Ok(()) };
        let tasks = &self.tasks;
        ids.retain(|id| tasks.contains_key(id));
        let running = ids.iter().filter(|id| !tasks[*id].record.status.is_terminal()).count();
        if quota.max_running > 0 && running as u64 >= quota.max_running {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Running,
                max: quota.max_running,
                retry_after_ms: None,
            });
        }
        let oldest = || {
            ids.iter()
                .filter_map(|id| tasks[id].record.ttl_ms.map(|ttl| tasks[id].record.created_ms.saturating_add(ttl)))
                .min()
                .map(|expires| expires.saturating_sub(now))
        };
        if quota.max_retained > 0 && ids.len() as u64 >= quota.max_retained {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Retained,
                max: quota.max_retained,
                retry_after_ms: oldest(),
            });
        }
        let stored: u64 = ids.iter().map(|id| tasks[id].stored_bytes).sum();
        if quota.max_bytes > 0 && stored.saturating_add(bytes) > quota.max_bytes {
            return Err(StoreError::QuotaExceeded {
                kind: QuotaKind::Bytes,
                max: quota.max_bytes,
                retry_after_ms: oldest(),
            });
        }
        Ok(())
    }

    /// See [`crate::TaskStore::charge`].
    pub(super) fn charge(&mut self, scope: &str, id: &TaskId, bytes: u64) {
        let counted = self.quotas.get(scope).is_some_and(|ids| ids.contains(id));
        if let Some(entry) = self.tasks.get_mut(id).filter(|_| counted) {
            entry.stored_bytes = entry.stored_bytes.saturating_add(bytes);
        }
    }

    /// A task that runs on `worker` from now on: created (or found, like `create`), its lease
    /// held, its job pending for that worker (as if read and claimed).
    pub(super) fn create_running(
        &mut self,
        task: NewTask,
        worker: &str,
        lease: u64,
        now: u64,
    ) -> Result<(Created, Option<(Lease, Job)>), StoreError> {
        let record = match self.create(task, now)? {
            Created::New(record) => record,
            other => return Ok((other, None)),
        };
        let job = self
            .queue
            .pop_back()
            .filter(|j| j.task == record.id)
            .unwrap_or_else(|| unreachable!("create enqueued its job last"));
        self.pending.insert(job.entry.clone(), Pending { job: job.clone(), worker: worker.to_owned(), delivered: now });
        let entry = self.tasks.get_mut(&record.id).unwrap_or_else(|| unreachable!("just created"));
        entry.lease_token = 1;
        entry.lease_until = now.saturating_add(lease);
        entry.record.attempts = 1;
        let lease = Lease {
            task: record.id.clone(),
            token: 1,
            entry: job.entry.clone(),
            worker: worker.to_owned(),
            // The memory store seals nothing.
            binding: mcpgate_seal::RecordBinding::default(),
        };
        Ok((Created::New(entry.record.clone()), Some((lease, job))))
    }

    fn enqueue(&mut self, task: TaskId) {
        self.next_entry += 1;
        self.queue.push_back(Job { task, entry: format!("{}-0", self.next_entry) });
    }

    pub(super) fn list(&self, owner: &str, cursor: Option<&ListCursor>, limit: usize) -> Page {
        let Some(index) = self.owners.get(owner) else {
            return Page { tasks: Vec::new(), next: None };
        };
        let after = cursor.and_then(|c| parse_cursor(&c.0));
        let mut tasks = Vec::with_capacity(limit.min(index.len()));
        let mut next = None;
        for (created, id) in index.iter().filter(|k| after.as_ref().is_none_or(|a| *k > a)) {
            if tasks.len() == limit {
                next = tasks.last().map(|r: &TaskRecord| ListCursor(cursor_of(r.created_ms, &r.id)));
                break;
            }
            if let Some(entry) = self.tasks.get(id) {
                debug_assert_eq!(entry.record.created_ms, *created);
                tasks.push(entry.view(Read::Control));
            }
        }
        Page { tasks, next }
    }

    pub(super) fn cancel(&mut self, id: &TaskId, owner: &str, now: u64) -> Cancelled {
        let Some(entry) = self.tasks.get_mut(id).filter(|e| e.record.owner == owner) else {
            return Cancelled::NotFound;
        };
        if entry.record.status.is_terminal() {
            return Cancelled::AlreadyTerminal(entry.record.clone());
        }
        entry.record.status = TaskStatus::Cancelled;
        entry.record.input_requests.clear();
        entry.record.status_message = Some("Cancelled by the client".to_owned());
        entry.record.updated_ms = now;
        entry.lease_until = 0;
        self.events.push((id.clone(), TaskEvent::Status(TaskStatus::Cancelled)));
        Cancelled::Now(entry.record.clone())
    }

    pub(super) fn claim(&mut self, job: &Job, worker: &str, lease: u64, max_attempts: u32, now: u64) -> Claim {
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

    pub(super) fn hold(
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

    pub(super) fn checkpoint(&mut self, lease: &Lease, state: &str) -> Renewal {
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

    pub(super) fn renew(&mut self, lease: &Lease, duration: u64, note: Option<&StatusNote>, now: u64) -> Renewal {
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
    pub(super) fn settle(&mut self, lease: &Lease, job: &Job, now: u64, apply: impl FnOnce(&mut Entry)) -> Settled {
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
    pub(super) fn release(&mut self, lease: &Lease, job: &Job, defer: Option<(u64, &str)>, now: u64) -> Settled {
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

    /// Puts read but unclaimed jobs back at the front of the queue.
    pub(super) fn hand_back(&mut self, jobs: &[Job]) {
        for job in jobs.iter().rev() {
            if self.pending.remove(&job.entry).is_some() {
                self.next_entry += 1;
                self.queue.push_front(Job { task: job.task.clone(), entry: format!("{}-0", self.next_entry) });
            }
        }
    }

    /// Records answers to a parked task (see `TaskStore::answer`).
    pub(super) fn answer(
        &mut self,
        id: &TaskId,
        owner: &str,
        answers: &CheckedAnswers,
        max_bytes: u64,
        now: u64,
    ) -> Answered {
        let Some(entry) = self.tasks.get_mut(id).filter(|e| e.record.owner == owner) else {
            return Answered::NotFound;
        };
        if entry.record.status != TaskStatus::InputRequired {
            return Answered::NotWaiting(entry.record.status);
        }
        let mut bytes = entry.answer_bytes;
        for (key, answer) in answers {
            if entry.record.input_requests.contains_key(key) {
                let asked = entry.asked.get(key).map(String::as_str);
                if !asked.is_some_and(|m| answer.fits.contains(&m)) {
                    return Answered::Invalid(key.clone());
                }
                bytes = bytes.saturating_add(answer.json.len() as u64);
            }
        }
        if bytes > max_bytes {
            return Answered::TooLarge(max_bytes);
        }
        entry.answer_bytes = bytes;
        let record = &mut entry.record;
        for (key, answer) in answers {
            if record.input_requests.remove(key).is_some() {
                let method = entry.asked.remove(key).unwrap_or_default();
                record.input_responses.insert(key.clone(), RawAnswer { method, json: answer.json.clone() });
            }
        }
        record.updated_ms = now;
        if !record.input_requests.is_empty() {
            return Answered::Waiting(record.input_requests.len());
        }
        record.status = TaskStatus::Working;
        record.status_message = Some("Input received; resuming".to_owned());
        self.events.push((id.clone(), TaskEvent::Status(TaskStatus::Working)));
        // A live run holding the task (asking in place) is woken by the event instead.
        if entry.lease_until <= now {
            self.enqueue(id.clone());
        }
        Answered::Resumed
    }

    /// Marks a single-use id (see `OnceMarks::first_use`).
    pub(super) fn first_use(&mut self, id: &str, expires_at_ms: u64) -> bool {
        if self.once.contains_key(id) {
            return false;
        }
        self.once.insert(id.to_owned(), expires_at_ms);
        self.once_order.push(Reverse((expires_at_ms, id.to_owned())));
        true
    }

    pub(super) fn queue_depth(&self) -> u64 {
        u64::try_from(self.queue.len() + self.pending.len()).unwrap_or(u64::MAX)
    }

    pub(super) fn take_jobs(&mut self, worker: &str, max: usize, now: u64) -> Vec<Job> {
        let n = max.min(self.queue.len());
        let jobs: Vec<Job> = self.queue.drain(..n).collect();
        for job in &jobs {
            self.pending
                .insert(job.entry.clone(), Pending { job: job.clone(), worker: worker.to_owned(), delivered: now });
        }
        jobs
    }

    pub(super) fn ack(&mut self, job: &Job) {
        self.pending.remove(&job.entry);
    }

    pub(super) fn reclaim(&mut self, worker: &str, idle: u64, max: usize, now: u64) -> Vec<Job> {
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

/// The error a task ends with when no attempt finished.
pub(crate) fn exhausted_error(attempts: u32) -> String {
    json!({
        "code": -32603,
        "message": format!("Task failed: its executor stopped before finishing, {attempts} times"),
    })
    .to_string()
}

/// `<13-digit created ms>:<id>`: sorts like (created, id).
pub(crate) fn cursor_of(created_ms: u64, id: &TaskId) -> String {
    format!("{created_ms:013}:{id}")
}

fn parse_cursor(cursor: &str) -> Option<(u64, TaskId)> {
    let (created, id) = cursor.split_once(':')?;
    Some((created.parse().ok()?, TaskId::parse(id)?))
}
