//! `AnyStore`: the store a replica runs with, chosen at start-up (memory without Redis, Redis
//! otherwise), dispatched statically so no call allocates a boxed future.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use crate::admin::{PurgeFilter, Purged, ScanPage};
use crate::contract::{
    EventBus, Fleet, JobQueue, Locks, OnceMarks, Pins, RateLimits, TaskAdmin, TaskStore, UpstreamLists, Vault,
};
use crate::error::StoreError;
use crate::events::Subscription;
use crate::fleet::Heartbeat;
use crate::memory::MemoryStore;
use crate::model::{
    Answered, Cancelled, CheckedAnswers, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawRequests, Read,
    Renewal, Settled, StatusNote, TaskEvent, TaskId, TaskOutcome, TaskRecord,
};
use crate::pins::{Approval, Approved, Observed, Withheld};
use crate::rate::{Admission, Bucket};
use crate::redis::RedisStore;
use crate::seal_ring::{RingConflict, RingKey, RingStep};
use crate::vault::{Expect, Put, VaultEntry, VaultKey, VaultKind, VaultPage};

/// One of the store implementations.
#[derive(Debug, Clone)]
pub enum AnyStore {
    /// In this process (single replica).
    Memory(MemoryStore),
    /// In Redis (any number of replicas).
    Redis(RedisStore),
}

impl AnyStore {
    /// Checks that the store answers (for readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Redis(s) => s.ping().await,
        }
    }

    /// Redis call latency and failures (none for the memory store).
    pub fn metrics(&self) -> Option<&crate::metrics::StoreMetrics> {
        match self {
            Self::Memory(_) => None,
            Self::Redis(s) => Some(s.metrics()),
        }
    }

    /// Jobs waiting in the queue or held by a worker.
    pub async fn queue_depth(&self) -> Result<u64, StoreError> {
        match self {
            Self::Memory(s) => Ok(s.queue_depth()),
            Self::Redis(s) => s.queue_depth().await,
        }
    }

    /// Checks this replica's seal key ring (sealing key first) against the rings of the
    /// other live replicas and records it (see [`RingStep`]); `live` is how long a record
    /// lasts unrefreshed. The memory store has no other replicas: nothing to check.
    pub async fn seal_ring(
        &self,
        replica: &str,
        ring: &[RingKey],
        live: Duration,
        step: RingStep,
    ) -> Result<Vec<RingConflict>, StoreError> {
        match self {
            Self::Memory(_) => Ok(Vec::new()),
            Self::Redis(s) => s.seal_ring(replica, ring, live, step).await,
        }
    }

    /// A short name for logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Memory(_) => "memory",
            Self::Redis(_) => "redis",
        }
    }
}

macro_rules! delegate {
    ($self:ident, $s:ident => $call:expr) => {
        match $self {
            AnyStore::Memory($s) => $call.await,
            AnyStore::Redis($s) => $call.await,
        }
    };
}

impl TaskStore for AnyStore {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        delegate!(self, s => s.create(task))
    }

    async fn create_running(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> Result<(Created, Option<(Lease, Job)>), StoreError> {
        delegate!(self, s => s.create_running(task, worker, lease))
    }

    async fn get(&self, id: &TaskId, read: Read) -> Result<Option<TaskRecord>, StoreError> {
        delegate!(self, s => s.get(id, read))
    }

    async fn list(&self, owner: &str, cursor: Option<&ListCursor>, limit: usize) -> Result<Page, StoreError> {
        delegate!(self, s => s.list(owner, cursor, limit))
    }

    async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        delegate!(self, s => s.cancel(id, owner))
    }

    async fn charge(&self, scope: &str, id: &TaskId, bytes: u64) -> Result<(), StoreError> {
        delegate!(self, s => s.charge(scope, id, bytes))
    }

    async fn claim(&self, job: &Job, worker: &str, lease: Duration, max_attempts: u32) -> Result<Claim, StoreError> {
        delegate!(self, s => s.claim(job, worker, lease, max_attempts))
    }

    async fn renew(&self, lease: &Lease, duration: Duration, note: Option<&StatusNote>) -> Result<Renewal, StoreError> {
        delegate!(self, s => s.renew(lease, duration, note))
    }

    async fn hold(
        &self,
        lease: &Lease,
        input_requests: &RawRequests,
        state: Option<Option<&str>>,
    ) -> Result<Renewal, StoreError> {
        delegate!(self, s => s.hold(lease, input_requests, state))
    }

    async fn checkpoint(&self, lease: &Lease, state: &str) -> Result<Renewal, StoreError> {
        delegate!(self, s => s.checkpoint(lease, state))
    }

    async fn finish(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        outcome: TaskOutcome,
        tool_error: bool,
    ) -> Result<Settled, StoreError> {
        delegate!(self, s => s.finish(lease, job, status, outcome, tool_error))
    }

    async fn park(
        &self,
        lease: &Lease,
        job: &Job,
        input_requests: &RawRequests,
        state: Option<&str>,
    ) -> Result<Settled, StoreError> {
        delegate!(self, s => s.park(lease, job, input_requests, state))
    }

    async fn answer(
        &self,
        id: &TaskId,
        owner: &str,
        answers: &CheckedAnswers,
        max_bytes: u64,
    ) -> Result<Answered, StoreError> {
        delegate!(self, s => s.answer(id, owner, answers, max_bytes))
    }

    async fn release(&self, lease: &Lease, job: &Job) -> Result<Settled, StoreError> {
        delegate!(self, s => s.release(lease, job))
    }

    async fn defer(&self, lease: &Lease, job: &Job, grace: Duration, error: &str) -> Result<Settled, StoreError> {
        delegate!(self, s => s.defer(lease, job, grace, error))
    }
}

impl JobQueue for AnyStore {
    async fn read(&self, worker: &str, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        delegate!(self, s => s.read(worker, max, block))
    }

    async fn hand_back(&self, jobs: &[Job]) -> Result<(), StoreError> {
        delegate!(self, s => s.hand_back(jobs))
    }

    async fn ack(&self, job: &Job) -> Result<(), StoreError> {
        delegate!(self, s => s.ack(job))
    }

    async fn reclaim(&self, worker: &str, idle: Duration, max: usize) -> Result<Vec<Job>, StoreError> {
        delegate!(self, s => s.reclaim(worker, idle, max))
    }

    async fn stop_reading(&self) {
        match self {
            AnyStore::Memory(s) => s.stop_reading().await,
            AnyStore::Redis(s) => s.stop_reading().await,
        }
    }

    async fn forget_idle_workers(&self, idle: Duration) -> Result<usize, StoreError> {
        delegate!(self, s => s.forget_idle_workers(idle))
    }
}

impl OnceMarks for AnyStore {
    async fn first_use(&self, id: &str, expires_at_ms: u64) -> Result<bool, StoreError> {
        delegate!(self, s => s.first_use(id, expires_at_ms))
    }
}

impl RateLimits for AnyStore {
    async fn admit(&self, scope: &str, buckets: &[Bucket]) -> Result<Admission, StoreError> {
        delegate!(self, s => s.admit(scope, buckets))
    }
}

impl EventBus for AnyStore {
    async fn subscribe(&self, id: &TaskId) -> Result<Subscription, StoreError> {
        delegate!(self, s => s.subscribe(id))
    }

    async fn publish(&self, id: &TaskId, event: TaskEvent) -> Result<(), StoreError> {
        delegate!(self, s => s.publish(id, event))
    }

    async fn publish_change(&self, change: &crate::change::Change) -> Result<(), StoreError> {
        delegate!(self, s => s.publish_change(change))
    }

    fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::change::Change> {
        match self {
            Self::Memory(s) => s.changes(),
            Self::Redis(s) => s.changes(),
        }
    }
}

impl UpstreamLists for AnyStore {
    async fn save_lists(&self, upstream: &str, lists: &str) -> Result<u64, StoreError> {
        delegate!(self, s => s.save_lists(upstream, lists))
    }

    async fn load_lists(&self, upstream: &str) -> Result<Option<String>, StoreError> {
        delegate!(self, s => s.load_lists(upstream))
    }

    async fn lists_generation(&self) -> Result<u64, StoreError> {
        delegate!(self, s => s.lists_generation())
    }
}

impl TaskAdmin for AnyStore {
    async fn scan(&self, cursor: Option<&str>, count: usize) -> Result<ScanPage, StoreError> {
        delegate!(self, s => s.scan(cursor, count))
    }

    async fn purge(&self, id: &TaskId, filter: &PurgeFilter) -> Result<Purged, StoreError> {
        delegate!(self, s => s.purge(id, filter))
    }

    async fn forget_quota(&self, scope: &str, id: &TaskId) -> Result<(), StoreError> {
        delegate!(self, s => s.forget_quota(scope, id))
    }
}

impl Vault for AnyStore {
    async fn vault_get(&self, key: &VaultKey) -> Result<Option<VaultEntry>, StoreError> {
        delegate!(self, s => s.vault_get(key))
    }

    async fn vault_put(&self, key: &VaultKey, value: &str, meta: &str, expect: Expect) -> Result<Put, StoreError> {
        delegate!(self, s => s.vault_put(key, value, meta, expect))
    }

    async fn vault_delete(&self, key: &VaultKey) -> Result<bool, StoreError> {
        delegate!(self, s => s.vault_delete(key))
    }

    async fn vault_delete_version(&self, key: &VaultKey, version: u64) -> Result<bool, StoreError> {
        delegate!(self, s => s.vault_delete_version(key, version))
    }

    async fn vault_list(
        &self,
        kind: VaultKind,
        scope: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<VaultPage, StoreError> {
        delegate!(self, s => s.vault_list(kind, scope, cursor, limit))
    }
}

impl Locks for AnyStore {
    async fn try_lock(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        delegate!(self, s => s.try_lock(name, holder, ttl))
    }

    async fn unlock(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        delegate!(self, s => s.unlock(name, holder))
    }
}

impl Pins for AnyStore {
    async fn pins_observe(
        &self,
        upstream: &str,
        seed: bool,
        tools: &[Observed],
    ) -> Result<crate::pins::Observation, StoreError> {
        delegate!(self, s => s.pins_observe(upstream, seed, tools))
    }

    async fn pins_approved(&self, upstream: &str) -> Result<Approved, StoreError> {
        delegate!(self, s => s.pins_approved(upstream))
    }

    async fn pins_withheld(&self, upstream: &str) -> Result<Vec<Withheld>, StoreError> {
        delegate!(self, s => s.pins_withheld(upstream))
    }

    async fn pins_approve(&self, upstream: &str, tool: &str, hash: &str) -> Result<Approval, StoreError> {
        delegate!(self, s => s.pins_approve(upstream, tool, hash))
    }
}

impl Fleet for AnyStore {
    async fn beat(&self, beat: &Heartbeat, live: Duration) -> Result<bool, StoreError> {
        delegate!(self, s => s.beat(beat, live))
    }

    async fn fleet(&self) -> Result<Vec<Heartbeat>, StoreError> {
        delegate!(self, s => s.fleet())
    }

    async fn leave(&self, replica: &str) -> Result<(), StoreError> {
        delegate!(self, s => s.leave(replica))
    }
}
