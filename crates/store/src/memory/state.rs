//! The state of the embedded store, as plain synchronous code run under the store's lock:
//! the task records, their expiry, the owner indexes, the single-use marks, and the owner's
//! own transitions (cancel, answer). Creating a task (`create`), a run's transitions under
//! its lease (`lease`) and the job queue (`queue`) are its parts, in files of their own.

mod create;
mod lease;
mod queue;

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap, HashMap, VecDeque};

use mcpgate_protocol::task::TaskStatus;

use crate::model::{
    Answered, Cancelled, CheckedAnswers, Job, ListCursor, Page, RawAnswer, Read, TaskEvent, TaskId, TaskRecord,
};
use queue::Pending;

/// A task as the embedded store keeps it: its record, and what only the store reads.
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
}

/// `<13-digit created ms>:<id>`: sorts like (created, id).
pub(crate) fn cursor_of(created_ms: u64, id: &TaskId) -> String {
    format!("{created_ms:013}:{id}")
}

fn parse_cursor(cursor: &str) -> Option<(u64, TaskId)> {
    let (created, id) = cursor.split_once(':')?;
    Some((created.parse().ok()?, TaskId::parse(id)?))
}
