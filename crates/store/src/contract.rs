//! The store contract: `TaskStore` (task records and their transitions), `JobQueue` (work to
//! run) and `EventBus` (what happened to a task). Each implementation (memory, Redis) honours
//! every clause below, and one test suite (`testing`, feature `testing`) checks both.
//!
//! Clauses common to every method: a task whose lifetime has passed behaves as absent; a
//! terminal status is never overwritten; every transition is atomic (it happens entirely or
//! not at all) and publishes a [`TaskEvent`] to the task's subscribers as part of it.

use std::future::Future;
use std::time::Duration;

use crate::error::StoreError;
use crate::events::Subscription;
use crate::model::{
    Answered, Cancelled, CheckedAnswers, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawRequests, Read,
    Renewal, Settled, StatusNote, TaskId, TaskOutcome, TaskRecord,
};
use crate::rate::{Admission, Bucket};
use crate::vault::{Expect, Put, VaultEntry, VaultKey, VaultKind, VaultPage};
use mcpgate_protocol::task::TaskStatus;

/// An operator's view of every task, whoever owns it, and deletion of ended ones: for an
/// admin API, never on a request path.
pub trait TaskAdmin: Send + Sync {
    /// One step of a scan over every task, from `cursor` (`None` = the start), visiting about
    /// `count` records; control fields only, never payloads.
    fn scan(
        &self,
        cursor: Option<&str>,
        count: usize,
    ) -> impl Future<Output = Result<crate::admin::ScanPage, StoreError>> + Send;

    /// Deletes task `id` if it ended and `filter` selects it, atomically with the check. Its
    /// quota places are not given back here (see [`TaskAdmin::forget_quota`]).
    fn purge(
        &self,
        id: &TaskId,
        filter: &crate::admin::PurgeFilter,
    ) -> impl Future<Output = Result<crate::admin::Purged, StoreError>> + Send;

    /// Stops counting task `id` against the quotas of caller `scope` (it was purged).
    fn forget_quota(&self, scope: &str, id: &TaskId) -> impl Future<Output = Result<(), StoreError>> + Send;
}

/// Task records and their state transitions.
pub trait TaskStore: Send + Sync {
    /// Creates a task in `working`, indexes it under its owner and enqueues its job, in one
    /// atomic step (one round trip on Redis). Durable when it returns: an immediate `get` on
    /// any replica finds it. With an idempotency scope: if that scope created a task within the
    /// window and the task still exists, returns it instead and creates nothing, or, when the
    /// scope was used for another call, creates nothing and says so.
    fn create(&self, task: NewTask) -> impl Future<Output = Result<Created, StoreError>> + Send;

    /// Creates a task that runs on `worker` from now on (run where created: a replica with a
    /// free slot, or a call that became a task while it ran), in one atomic step like `create`
    /// (deduplicated the same way): the task starts `working` under a lease held by `worker`
    /// (attempt 1, fencing token 1) and no job is enqueued; should `worker` stop renewing, the
    /// task is taken over once the lease lapses, like any run's (on Redis, a sweep of the lease
    /// index enqueues it). Returns what `create` returns and, for a task created anew, the
    /// lease and the job to settle it with.
    fn create_running(
        &self,
        task: NewTask,
        worker: &str,
        lease: Duration,
    ) -> impl Future<Output = Result<(Created, Option<(Lease, Job)>), StoreError>> + Send;

    /// Reads as much of a task as `read` says (one round trip; a second one only for the
    /// outstanding requests of a parked task read with less than [`Read::Full`]). `None` when
    /// unknown or expired. Does not check the owner: callers compare [`TaskRecord::owner`]
    /// and answer "not found" for others.
    fn get(&self, id: &TaskId, read: Read) -> impl Future<Output = Result<Option<TaskRecord>, StoreError>> + Send;

    /// One page of `owner`'s tasks, oldest first, after `cursor`. No scans: reads the owner's
    /// index (one key per shard) and the listed records.
    fn list(
        &self,
        owner: &str,
        cursor: Option<&ListCursor>,
        limit: usize,
    ) -> impl Future<Output = Result<Page, StoreError>> + Send;

    /// Cancels `owner`'s task unless it is terminal (one round trip). Idempotent: cancelling
    /// a terminal task changes nothing and says so. Another owner's task is `NotFound`.
    fn cancel(&self, id: &TaskId, owner: &str) -> impl Future<Output = Result<Cancelled, StoreError>> + Send;

    /// Counts `bytes` more (a result just recorded) against the stored-bytes quota of the
    /// caller `scope` for task `id`, if that task is counted there (created under a bytes
    /// quota and not expired); otherwise nothing. May take the caller over its quota: only
    /// later creations are refused.
    fn charge(&self, scope: &str, id: &TaskId, bytes: u64) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Takes the right to run a job's task: a new lease (fencing token + 1, attempt + 1) when
    /// the task is `working` and no live lease exists. Acknowledges jobs that have nothing to
    /// do (gone, terminal, parked). Past `max_attempts` the task becomes `failed` and the job
    /// is moved to the dead-letter queue, in the same step.
    fn claim(
        &self,
        job: &Job,
        worker: &str,
        lease: Duration,
        max_attempts: u32,
    ) -> impl Future<Output = Result<Claim, StoreError>> + Send;

    /// Extends a lease and records the tool's latest status note (one round trip; a note
    /// without a fraction keeps the last fraction known). Tells the holder when to stop:
    /// cancelled, gone, or superseded by a newer lease.
    fn renew(
        &self,
        lease: &Lease,
        duration: Duration,
        note: Option<&StatusNote>,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Records a running task's continuation state under the current lease (one round trip)
    /// and marks the task resumable: a later run (after this one died) gets the state and may
    /// resume from it even when its tool is not retry-safe. Answers like `renew`.
    fn checkpoint(&self, lease: &Lease, state: &str) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Asks for input without ending the run (one round trip, under the current lease): the
    /// task goes `input_required` with `input_requests` as `park` records them, but the worker
    /// keeps its lease and job; answers completing the requests then resume it in place (no
    /// new job, see `answer`) while the lease lives. `state`: `None` keeps the task's state (a
    /// checkpoint), `Some(s)` replaces it with this round's continuation (the task then is not
    /// resumable), so a run resumed after this one stopped continues from the right round. If the
    /// run is released meanwhile (shutdown), the task waits as if parked. Answers like `renew`.
    fn hold(
        &self,
        lease: &Lease,
        input_requests: &RawRequests,
        state: Option<Option<&str>>,
    ) -> impl Future<Output = Result<Renewal, StoreError>> + Send;

    /// Writes the final status and outcome (`tool_error`: a tool result with `isError: true`)
    /// and acknowledges the job, in one atomic step (one round trip), only with the current
    /// lease and only from a non-terminal status. The status message the run last reported is
    /// dropped (it named a step, not the ending); a completed task's reported progress becomes
    /// 1, a failed one's stays where the run left it. Safe to repeat with the same lease after a
    /// lost reply: a repeat finds the outcome written and changes nothing (`finish` and
    /// `park` both say `Done` or `AlreadyTerminal` then, never `Lost` unless another worker
    /// took the task over since).
    fn finish(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        outcome: TaskOutcome,
        tool_error: bool,
    ) -> impl Future<Output = Result<Settled, StoreError>> + Send;

    /// Parks a task as `input_required` with its outstanding requests (method and raw JSON by
    /// key) and continuation state and acknowledges the job, in one atomic step (one round
    /// trip), only with the current lease. The worker is released: an answer re-enqueues the
    /// task. The run ended cleanly, so its attempt is given back (a task may park any number
    /// of times). Safe to repeat with the same lease, like `finish`.
    fn park(
        &self,
        lease: &Lease,
        job: &Job,
        input_requests: &RawRequests,
        state: Option<&str>,
    ) -> impl Future<Output = Result<Settled, StoreError>> + Send;

    /// Records `owner`'s answers to a parked task (one round trip, atomic, its cost independent
    /// of the answers' size: the caller decoded and size-checked them): answers to keys not
    /// outstanding are ignored; an answer whose `fits` lacks its request's method refuses
    /// them all; so does taking the task's recorded answers past `max_bytes`; answered keys
    /// stop being outstanding and join the task's collected answers; once none remain the
    /// task is `working` again and its job enqueued, so any worker resumes it.
    fn answer(
        &self,
        id: &TaskId,
        owner: &str,
        answers: &CheckedAnswers,
        max_bytes: u64,
    ) -> impl Future<Output = Result<Answered, StoreError>> + Send;

    /// Gives a running task back without an outcome (its worker is shutting down), in one
    /// atomic step, only with the current lease: the task stays `working`, the attempt does
    /// not count, and its job is enqueued afresh so any worker takes it over at once instead
    /// of after the lease lapses.
    fn release(&self, lease: &Lease, job: &Job) -> impl Future<Output = Result<Settled, StoreError>> + Send;

    /// Gives a claimed task back because this worker cannot run it (it does not know the
    /// tool, e.g. during a rolling upgrade), like `release`, so another replica may; the first
    /// deferral is remembered, and once `grace` has passed since then the task fails with
    /// `error` (a JSON-RPC error object) instead ([`Settled::GaveUp`]).
    fn defer(
        &self,
        lease: &Lease,
        job: &Job,
        grace: Duration,
        error: &str,
    ) -> impl Future<Output = Result<Settled, StoreError>> + Send;
}

/// One-time marks with an expiry (single-use tokens).
pub trait OnceMarks: Send + Sync {
    /// Marks `id` as used until `expires_at_ms` (Unix ms); true if it was not marked before.
    /// Atomic: of two concurrent calls with one id, exactly one gets true. One round trip.
    /// With `store.replicas_ack`, a first use is true only once the replicas hold the mark
    /// (else `NotAcknowledged`, and the mark may have landed: the id counts as spent).
    fn first_use(&self, id: &str, expires_at_ms: u64) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// Rate limits shared by every replica: GCRA buckets (see [`Bucket`]).
pub trait RateLimits: Send + Sync {
    /// Charges one request of `scope` (a principal) to every bucket in `buckets`, all or
    /// nothing: a request refused by one bucket is charged to none. Names must be unique
    /// within a call. One round trip.
    fn admit(&self, scope: &str, buckets: &[Bucket]) -> impl Future<Output = Result<Admission, StoreError>> + Send;
}

/// The queue of jobs, consumed by every replica's workers.
pub trait JobQueue: Send + Sync {
    /// Waits up to `block` for new jobs for this worker: about `max`, never more than
    /// `max + shards - 1` (Redis caps a multi-stream read per stream, not in total; callers
    /// run the surplus as room frees up). A job read here stays pending until acknowledged;
    /// if its worker dies, [`JobQueue::reclaim`] hands it to another.
    fn read(
        &self,
        worker: &str,
        max: usize,
        block: Duration,
    ) -> impl Future<Output = Result<Vec<Job>, StoreError>> + Send;

    /// Puts jobs this worker read but will not claim (it has no free slot for them) back on
    /// the queue for any worker, at once (one round trip per job, sent together).
    fn hand_back(&self, jobs: &[Job]) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Acknowledges a job that needs no more work (normally done by `finish`/`park`/`claim`).
    fn ack(&self, job: &Job) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Takes over at most `max` jobs pending for longer than `idle` (their worker died or is
    /// stuck), resuming where the previous call stopped so every pending job is reached in
    /// turn. The caller then claims them; a live lease makes the claim skip. Also enqueues
    /// tasks whose run-where-created lease lapsed (see `TaskStore::create_running`), for any
    /// worker to read.
    fn reclaim(
        &self,
        worker: &str,
        idle: Duration,
        max: usize,
    ) -> impl Future<Output = Result<Vec<Job>, StoreError>> + Send;

    /// Ends a blocking read this worker left in flight (its reader stopped waiting, e.g. at
    /// shutdown): a read the server still holds would otherwise take the next job for a
    /// worker that never runs it, and the job would wait until reclaimed. Call once no more
    /// reads will be made for now (shutdown, or a drain); a later `read` resumes reading.
    fn stop_reading(&self) -> impl Future<Output = ()> + Send;

    /// Forgets workers (queue consumers) that hold no jobs and were last seen longer than
    /// `idle` ago, e.g. replicas that were replaced, so the queue's bookkeeping stays bounded
    /// however often replicas restart. Returns how many were forgotten.
    fn forget_idle_workers(&self, idle: Duration) -> impl Future<Output = Result<usize, StoreError>> + Send;
}

/// Task events, fanned out to local subscribers.
pub trait EventBus: Send + Sync {
    /// Subscribes to a task's events. Effective when this returns: an event of any later
    /// transition is delivered (read the task after subscribing to not miss earlier ones).
    fn subscribe(&self, id: &TaskId) -> impl Future<Output = Result<Subscription, StoreError>> + Send;

    /// Publishes an event to every subscriber of the task on every replica.
    fn publish(
        &self,
        id: &TaskId,
        event: crate::model::TaskEvent,
    ) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Announces a catalog change to every replica's listeners (this one's included).
    fn publish_change(&self, change: &crate::change::Change) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// This replica's feed of catalog changes from every replica, from now on. A receiver
    /// that falls behind sees `Lagged` and should treat it as [`crate::change::Change::Missed`].
    fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::change::Change>;
}

/// What each upstream server listed last, shared by every replica so a replica that starts
/// while an upstream is down still serves its entries, with a generation number that changes
/// whenever any upstream's lists do (replicas poll it to rebuild their catalogs at once).
pub trait UpstreamLists: Send + Sync {
    /// Stores `upstream`'s lists (opaque JSON) and advances the generation, atomically (one
    /// round trip). Returns the new generation.
    fn save_lists(&self, upstream: &str, lists: &str) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// `upstream`'s stored lists, if any.
    fn load_lists(&self, upstream: &str) -> impl Future<Output = Result<Option<String>, StoreError>> + Send;

    /// The current generation (0 before anything was saved). One round trip.
    fn lists_generation(&self) -> impl Future<Output = Result<u64, StoreError>> + Send;
}

/// Secrets kept for the fleet (see `vault`): values sealed by the caller, versioned for
/// compare-and-set, listed by operators without their values. Every method is one round trip.
pub trait Vault: Send + Sync {
    /// The entry at `key`, if any.
    fn vault_get(&self, key: &VaultKey) -> impl Future<Output = Result<Option<VaultEntry>, StoreError>> + Send;

    /// Writes `value` (sealed) and `meta` (clear) at `key` if the entry is as `expect` says;
    /// atomically, so of two writers expecting one version, one wins. With
    /// `store.replicas_ack`, answered only once the replicas hold it (as are the deletes).
    fn vault_put(
        &self,
        key: &VaultKey,
        value: &str,
        meta: &str,
        expect: Expect,
    ) -> impl Future<Output = Result<Put, StoreError>> + Send;

    /// Deletes the entry at `key`; whether there was one.
    fn vault_delete(&self, key: &VaultKey) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Deletes the entry at `key` only while it is at `version` (a delete decided on what was
    /// read never removes an entry written since); whether it did.
    fn vault_delete_version(
        &self,
        key: &VaultKey,
        version: u64,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Up to `limit` entries of `kind` (of `scope` only, when given), in (scope, name) order,
    /// from `cursor` (a page's `next`): metadata only, never a value.
    fn vault_list(
        &self,
        kind: VaultKind,
        scope: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> impl Future<Output = Result<VaultPage, StoreError>> + Send;
}

/// Named locks across the fleet, for work only one replica may do at a time (spending a
/// rotating refresh token, registering the gateway as a client once). A lock lapses after its
/// time to live, so a replica that dies holding one holds up the others no longer than that.
pub trait Locks: Send + Sync {
    /// Takes lock `name` for `holder` (a value unique to this attempt) for `ttl`; whether it
    /// was free.
    fn try_lock(
        &self,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// Releases lock `name` if `holder` still holds it (never another's, after a lapse);
    /// whether it did.
    fn unlock(&self, name: &str, holder: &str) -> impl Future<Output = Result<bool, StoreError>> + Send;
}

/// Pinned tool definitions of upstreams (see `pins`), one upstream's keys in one Redis Cluster
/// slot. Every method is one round trip and atomic.
pub trait Pins: Send + Sync {
    /// Records what `upstream` lists now: first seeds the approved set with `tools` when
    /// `seed` (first-seen) and nothing was ever approved for it (of two replicas racing, one
    /// seeds, and both read its set); then keeps, as the latest seen, exactly the tools whose
    /// hash is not the approved one (changed tools before new ones when over the bound).
    /// Returns the approved hashes, and whether this call seeded them. `tools` names each tool
    /// at most once (the caller records a name the upstream listed twice as one stub with an
    /// empty hash, which is never seeded).
    fn pins_observe(
        &self,
        upstream: &str,
        seed: bool,
        tools: &[crate::pins::Observed],
    ) -> impl Future<Output = Result<crate::pins::Observation, StoreError>> + Send;

    /// The approved hashes of `upstream` (empty when none).
    fn pins_approved(&self, upstream: &str) -> impl Future<Output = Result<crate::pins::Approved, StoreError>> + Send;

    /// The tools of `upstream` withheld at the last observation, with both definitions, by name.
    fn pins_withheld(
        &self,
        upstream: &str,
    ) -> impl Future<Output = Result<Vec<crate::pins::Withheld>, StoreError>> + Send;

    /// Approves the latest seen definition of `tool` if its hash is `hash` (compare-and-set:
    /// a definition seen since the operator looked is not approved). Safe to repeat.
    fn pins_approve(
        &self,
        upstream: &str,
        tool: &str,
        hash: &str,
    ) -> impl Future<Output = Result<crate::pins::Approval, StoreError>> + Send;
}

/// The fleet's heartbeats (see [`crate::Heartbeat`]): each live replica's record, written
/// every few seconds with a lifetime.
pub trait Fleet: Send + Sync {
    /// Records `beat` as its replica's, living `live` unless written again; its
    /// `written_ms` is set by the store's clock and its text fields cut to
    /// [`crate::MAX_FIELD_BYTES`]. Returns false (recording nothing) when
    /// [`crate::MAX_REPLICAS`] other replicas are live. One round trip.
    fn beat(&self, beat: &crate::Heartbeat, live: Duration) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// The live replicas' heartbeats (at most [`crate::MAX_REPLICAS`]), by replica id. One
    /// round trip.
    fn fleet(&self) -> impl Future<Output = Result<Vec<crate::Heartbeat>, StoreError>> + Send;

    /// Removes `replica`'s record (a stopping replica's). Safe to repeat.
    fn leave(&self, replica: &str) -> impl Future<Output = Result<(), StoreError>> + Send;
}
