//! This replica's cache of finished task records: a `tasks/get` of a completed, failed or
//! cancelled task read once from Redis is answered from memory afterwards, with no round trip.
//! A terminal record never changes (every script refuses to write one), so what is kept can
//! only be stale in being gone: purged by an operator on some replica (`purge.lua` publishes
//! `purged` on the task's event channel, which every replica's subscriber acts on), or expired
//! (an entry is dropped at the record's `createdAt + ttl`, by this replica's clock), and at
//! the latest [`MAX_AGE_MS`] after it was kept, which bounds whatever invalidation this
//! replica could miss without noticing. A hit is shared (`Arc`) and copied outside the lock.
//!
//! Invariants: only terminal records are kept, opened (as a store read hands them out), never
//! with more than their read fetched (no arguments, state or credential); an entry serves a
//! read asking for no more than it holds; the cache is bounded in entries and bytes, and a
//! record whose fields exceed the per-record bound is not kept. Nothing is served or kept
//! while the event subscriber is not confirmed on a live connection; it is emptied when that
//! connection is lost and again when it is back (messages may have been missed meanwhile). An
//! insertion is refused if any invalidation happened since its read was issued (a `purged`
//! published after the read was answered may arrive before the read's reply is handled).
//! Owner and virtual-server checks stay with the callers of `get`, applied to a cached record
//! exactly as to one read from Redis.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use crate::model::{Read, TaskId, TaskOutcome, TaskRecord};

/// Bounds of a replica's cache of finished task records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TerminalCacheLimits {
    /// Most records kept (0 = no cache).
    pub entries: usize,
    /// Most bytes of records kept (their fields' lengths plus a fixed overhead each).
    pub bytes: usize,
    /// A record larger than this (e.g. a big result) is not kept.
    pub record_bytes: usize,
}

impl Default for TerminalCacheLimits {
    fn default() -> Self {
        Self { entries: 10_000, bytes: 64 << 20, record_bytes: 64 << 10 }
    }
}

/// What the cache holds now (for tests and operators).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TerminalCacheStats {
    /// Records kept.
    pub entries: usize,
    /// Their bytes, as counted against [`TerminalCacheLimits::bytes`].
    pub bytes: usize,
    /// Reads answered from the cache since start.
    pub hits: u64,
}

/// Bytes counted for a record beyond its fields' lengths: the record struct and its `Arc`, the
/// entry, the map's slot and the id kept in the map and twice in the order queue (measured
/// around 1–1.5 KiB for a small record; counted high so `bytes` bounds real memory).
const OVERHEAD: usize = 1536;

/// Longest an entry is kept whatever the record's own expiry: the backstop for every
/// invalidation this replica may miss without noticing (a notice lost between cluster nodes,
/// a failover that loses a settle before it reached a replica, a purge by a replica of an
/// older release that publishes nothing, a clock behind Redis's).
pub(super) const MAX_AGE_MS: u64 = 60_000;

/// See the module docs.
#[derive(Default)]
pub(super) struct TerminalCache {
    state: Mutex<State>,
}

/// Counts only: the entries hold opened results, which must never reach a log.
impl std::fmt::Debug for TerminalCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stats = self.stats();
        f.debug_struct("TerminalCache").field("entries", &stats.entries).field("bytes", &stats.bytes).finish()
    }
}

/// A permission to insert what a read issued now returns (see [`TerminalCache::ticket`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Ticket(u64);

#[derive(Default)]
struct State {
    limits: TerminalCacheLimits,
    /// Whether the subscriber's subscriptions are confirmed on a live connection.
    live: bool,
    /// Bumped by every invalidation: a read issued before it may have seen a record since
    /// deleted.
    epoch: u64,
    entries: HashMap<TaskId, Entry>,
    /// Insertion order, oldest first, for eviction; an item whose entry is gone or was
    /// re-inserted (its `seq` differs) is skipped.
    order: VecDeque<(TaskId, u64)>,
    bytes: usize,
    seq: u64,
    hits: u64,
}

struct Entry {
    /// Shared, so a hit copies it after the lock is released.
    record: Arc<TaskRecord>,
    /// How much of the record it holds: [`Read::Control`] or [`Read::WithOutcome`].
    read: Read,
    /// Ms (this replica's clock) at which the entry goes: the record's expiry, or
    /// [`MAX_AGE_MS`] after it was kept, whichever is first.
    expires_ms: u64,
    bytes: usize,
    seq: u64,
}

impl TerminalCache {
    /// Replaces the bounds (evicting what no longer fits).
    pub(super) fn set_limits(&self, limits: TerminalCacheLimits) {
        let mut state = self.lock();
        state.limits = limits;
        state.evict();
    }

    /// The finished record of task `id` as a read of `read` would return it, if kept and not
    /// expired at `now_ms`.
    pub(super) fn get(&self, id: &TaskId, read: Read, now_ms: u64) -> Option<TaskRecord> {
        if read == Read::Full {
            return None;
        }
        let record = {
            let mut state = self.lock();
            if !state.live {
                return None;
            }
            let entry = state.entries.get(id)?;
            if now_ms >= entry.expires_ms {
                state.remove(id);
                return None;
            }
            if read == Read::WithOutcome && entry.read != Read::WithOutcome {
                return None;
            }
            let record = entry.record.clone();
            state.hits += 1;
            record
        };
        // Copied outside the lock: a big result must not hold up every other read.
        Some(if read == Read::Control && record.outcome.is_some() {
            // A control read renders no outcome: not copied.
            clone_without_outcome(&record)
        } else {
            TaskRecord::clone(&record)
        })
    }

    /// Taken before a read is issued: what it returns may be kept only if nothing was
    /// invalidated meanwhile (and the subscriber is live now).
    pub(super) fn ticket(&self) -> Option<Ticket> {
        let state = self.lock();
        (state.live && state.limits.entries > 0).then_some(Ticket(state.epoch))
    }

    /// Keeps `record`, just read for task `id` with `read` under `ticket` at `now_ms`, if it
    /// is terminal, is the record of `id` (a hash copied under another key by someone with
    /// Redis access is answered, not kept under the id it names), fits, and nothing was
    /// invalidated since the ticket was taken.
    pub(super) fn insert(&self, ticket: Ticket, id: &TaskId, read: Read, record: &TaskRecord, now_ms: u64) {
        if read == Read::Full || !record.status.is_terminal() || record.id != *id {
            return;
        }
        let bytes = size_of(record);
        let kept_until = now_ms.saturating_add(MAX_AGE_MS);
        let expires_ms = record.ttl_ms.map_or(kept_until, |ttl| record.created_ms.saturating_add(ttl).min(kept_until));
        // Copied before the lock is taken.
        let record = Arc::new(record.clone());
        let mut state = self.lock();
        if !state.live || state.epoch != ticket.0 || bytes > state.limits.record_bytes || state.limits.entries == 0 {
            return;
        }
        if state.entries.get(&record.id).is_some_and(|e| e.read == Read::WithOutcome || e.read == read) {
            return;
        }
        state.remove(&record.id);
        state.seq += 1;
        let seq = state.seq;
        state.entries.insert(record.id.clone(), Entry { record: record.clone(), read, expires_ms, bytes, seq });
        state.order.push_back((record.id.clone(), seq));
        state.bytes += bytes;
        state.evict();
    }

    /// Task `id` was deleted (purged) somewhere: dropped here, and reads in flight may not
    /// keep what they return.
    pub(super) fn invalidate(&self, id: &TaskId) {
        let mut state = self.lock();
        state.epoch += 1;
        state.remove(id);
    }

    /// The subscriber is confirmed on a new connection (`true`) or lost its connection
    /// (`false`): either way messages may have been missed, so everything kept goes.
    pub(super) fn set_live(&self, live: bool) {
        let (entries, order) = {
            let mut state = self.lock();
            state.live = live;
            state.epoch += 1;
            state.bytes = 0;
            (std::mem::take(&mut state.entries), std::mem::take(&mut state.order))
        };
        // Freed after the lock is released: a big cache must not stall every read meanwhile.
        drop((entries, order));
    }

    pub(super) fn stats(&self) -> TerminalCacheStats {
        let state = self.lock();
        TerminalCacheStats { entries: state.entries.len(), bytes: state.bytes, hits: state.hits }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl State {
    fn remove(&mut self, id: &TaskId) {
        if let Some(entry) = self.entries.remove(id) {
            self.bytes -= entry.bytes;
        }
    }

    /// Drops the oldest entries until the bounds hold; keeps the order queue from growing
    /// past twice the entries with items of entries already gone.
    fn evict(&mut self) {
        while self.entries.len() > self.limits.entries || self.bytes > self.limits.bytes {
            let Some((id, seq)) = self.order.pop_front() else { break };
            if self.entries.get(&id).is_some_and(|e| e.seq == seq) {
                self.remove(&id);
            }
        }
        if self.order.len() > 2 * self.entries.len() + 64 {
            let entries = &self.entries;
            self.order.retain(|(id, seq)| entries.get(id).is_some_and(|e| e.seq == *seq));
        }
    }
}

/// What a record is counted as.
fn size_of(record: &TaskRecord) -> usize {
    let outcome = match &record.outcome {
        Some(TaskOutcome::Result(s) | TaskOutcome::Error(s)) => s.len(),
        None => 0,
    };
    OVERHEAD
        + record.id.as_str().len()
        + record.owner.len()
        + record.issuer.len()
        + record.subject.len()
        + record.tool.len()
        + record.status_message.as_ref().map_or(0, String::len)
        + record.server.as_ref().map_or(0, String::len)
        + record.trace.as_ref().map_or(0, String::len)
        + record.arguments.len()
        + record.capabilities.len()
        + outcome
}

/// `record` with its outcome left out (not copied).
fn clone_without_outcome(record: &TaskRecord) -> TaskRecord {
    TaskRecord {
        id: record.id.clone(),
        owner: record.owner.clone(),
        issuer: record.issuer.clone(),
        subject: record.subject.clone(),
        era: record.era,
        tool: record.tool.clone(),
        arguments: record.arguments.clone(),
        capabilities: record.capabilities.clone(),
        scopes: record.scopes.clone(),
        status: record.status,
        status_message: record.status_message.clone(),
        progress_ppm: record.progress_ppm,
        created_ms: record.created_ms,
        updated_ms: record.updated_ms,
        ttl_ms: record.ttl_ms,
        poll_interval_ms: record.poll_interval_ms,
        outcome: None,
        tool_error: record.tool_error,
        attempts: record.attempts,
        resumable: record.resumable,
        input_requests: record.input_requests.clone(),
        state: None,
        input_responses: record.input_responses.clone(),
        credential: None,
        trace: record.trace.clone(),
        server: record.server.clone(),
    }
}
