//! The state of the embedded store and its transitions, as plain synchronous code run under
//! the store's lock.

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use serde_json::json;

use mcpgate_protocol::task::TaskStatus;

use crate::model::{
    Answered, Cancelled, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawAnswer, RawByKey, Renewal, Settled,
    Skip, TaskEvent, TaskId, TaskOutcome, TaskRecord,
};

/// Most dead-lettered jobs kept in memory.
const MAX_DEAD: usize = 1000;

pub(super) struct Entry {
    pub(super) record: TaskRecord,
    lease_token: u64,
    lease_until: u64,
}

struct Pending {
    job: Job,
    worker: String,
    delivered: u64,
}

pub(super) struct State {
    shards: u16,
    pub(super) tasks: HashMap<TaskId, Entry>,
    expiries: BTreeSet<(u64, TaskId)>,
    idempotency: HashMap<[u8; 32], (TaskId, u64)>,
    idempotency_order: VecDeque<(u64, [u8; 32])>,
    owners: HashMap<String, BTreeSet<(u64, TaskId)>>,
    queue: VecDeque<Job>,
    pending: HashMap<String, Pending>,
    dead: VecDeque<Job>,
    once: HashMap<String, u64>,
    once_order: BinaryHeap<Reverse<(u64, String)>>,
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
            dead: VecDeque::new(),
            once: HashMap::new(),
            once_order: BinaryHeap::new(),
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
            if self.idempotency.get(&digest).is_some_and(|(_, exp)| *exp <= now) {
                self.idempotency.remove(&digest);
            }
        }
    }

    pub(super) fn create(&mut self, task: NewTask, now: u64) -> Created {
        if let Some((id, _)) = self.idempotency.get(&task.idempotency)
            && let Some(entry) = self.tasks.get(id)
        {
            return Created::Existing(entry.record.clone());
        }
        let shard = u16::from(task.idempotency[0]) % self.shards;
        let id = TaskId::generate(u8::try_from(shard).unwrap_or(0));
        let (ttl_ms, idempotency, window_ms) = (task.ttl_ms, task.idempotency, task.idempotency_window_ms);
        let record = task.into_record(id.clone(), now);
        if let Some(ttl) = ttl_ms {
            self.expiries.insert((now.saturating_add(ttl), id.clone()));
        }
        self.owners.entry(record.owner.clone()).or_default().insert((now, id.clone()));
        let expires = now.saturating_add(window_ms);
        self.idempotency.insert(idempotency, (id.clone(), expires));
        self.idempotency_order.push_back((expires, idempotency));
        self.enqueue(id.clone());
        self.tasks.insert(id, Entry { record: record.clone(), lease_token: 0, lease_until: 0 });
        Created::New(record)
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
                tasks.push(entry.record.clone());
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
            },
            task: Box::new(entry.record.clone()),
        }
    }

    pub(super) fn renew(&mut self, lease: &Lease, duration: u64, message: Option<&str>, now: u64) -> Renewal {
        let Some(entry) = self.tasks.get_mut(&lease.task) else { return Renewal::Gone };
        if entry.record.status == TaskStatus::Cancelled {
            return Renewal::Cancelled;
        }
        if entry.lease_token != lease.token || entry.record.status.is_terminal() {
            return Renewal::Lost;
        }
        entry.lease_until = now.saturating_add(duration);
        if let Some(message) = message
            && entry.record.status_message.as_deref() != Some(message)
        {
            entry.record.status_message = Some(message.to_owned());
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
    pub(super) fn settle(
        &mut self,
        lease: &Lease,
        job: &Job,
        now: u64,
        apply: impl FnOnce(&mut TaskRecord),
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
        apply(&mut entry.record);
        entry.record.updated_ms = now;
        entry.lease_until = 0;
        let status = entry.record.status;
        self.events.push((lease.task.clone(), TaskEvent::Status(status)));
        self.ack(job);
        Settled::Done
    }

    /// Gives a running task back (see `TaskStore::release`).
    pub(super) fn release(&mut self, lease: &Lease, job: &Job) -> Settled {
        let Some(entry) = self.tasks.get_mut(&lease.task) else {
            self.ack(job);
            return Settled::Gone;
        };
        if entry.lease_token != lease.token {
            return Settled::Lost;
        }
        if entry.record.status != TaskStatus::Working {
            self.ack(job);
            return Settled::AlreadyTerminal;
        }
        entry.lease_until = 0;
        entry.record.attempts = entry.record.attempts.saturating_sub(1);
        self.ack(job);
        self.enqueue(lease.task.clone());
        Settled::Done
    }

    /// Records answers to a parked task (see `TaskStore::answer`).
    pub(super) fn answer(&mut self, id: &TaskId, owner: &str, answers: &RawByKey, now: u64) -> Answered {
        let Some(entry) = self.tasks.get_mut(id).filter(|e| e.record.owner == owner) else {
            return Answered::NotFound;
        };
        let record = &mut entry.record;
        if record.status != TaskStatus::InputRequired {
            return Answered::NotWaiting(record.status);
        }
        let mut methods = RawByKey::new();
        for (key, answer) in answers {
            if let Some(request) = record.input_requests.get(key) {
                match fits(request, answer) {
                    Some(method) => methods.insert(key.clone(), method.to_owned()),
                    None => return Answered::Invalid(key.clone()),
                };
            }
        }
        for (key, answer) in answers {
            if record.input_requests.remove(key).is_some() {
                let method = methods.remove(key).unwrap_or_default();
                record.input_responses.insert(key.clone(), RawAnswer { method, json: answer.clone() });
            }
        }
        record.updated_ms = now;
        if !record.input_requests.is_empty() {
            return Answered::Waiting(record.input_requests.len());
        }
        record.status = TaskStatus::Working;
        record.status_message = Some("Input received; resuming".to_owned());
        self.events.push((id.clone(), TaskEvent::Status(TaskStatus::Working)));
        self.enqueue(id.clone());
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

/// The method of the request, if the answer is a result of it (as `answer.lua` checks).
fn fits(request: &str, answer: &str) -> Option<&'static str> {
    use mcpgate_protocol::input::{InputRequest, InputResponse};
    let method = serde_json::from_str::<InputRequest>(request).ok()?.method();
    let mut de = serde_json::Deserializer::from_str(answer);
    InputResponse::decode_for(method, &mut de).ok().map(|_| method)
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
