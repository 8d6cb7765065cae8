//! Task workers: every replica runs the tasks it creates at once while it has a free slot
//! (run where created), reads the other jobs from the shared queue, and runs them all on a
//! bounded local pool, each under a lease it renews while the tool runs; tasks whose worker
//! died are taken over once their lease lapsed.
//!
//! Invariants: at most `max_running` jobs run at once per replica, and a replica holds no
//! job it has no free slot for (a read that returns more is handed back at once); a run stops
//! within a moment of its task being cancelled (an event, with lease renewal as the fallback),
//! expiring, or being taken over, and before its lease can lapse when renewals fail (so no
//! other replica can start the same task while it still runs); only the current lease holder
//! can record an outcome, and an outcome whose write fails is retried with the same lease; a
//! task whose tool this replica does not know is left for another replica; when the shutdown
//! grace period ends, running jobs are handed back (re-enqueued, the attempt not counted) so
//! another replica finishes them, or, if Redis cannot be reached, their leases lapse and they
//! are reclaimed.

mod execution;
mod run_end;
mod watchdog;

pub use run_end::{RunEnd, RunWatch};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use mcpgate_protocol::ErrorObject;
use mcpgate_store::{AnyStore, Job, JobQueue as _, StatusNote};

use std::future::Future;

use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::EventBus as _;

use crate::catalog::{Failure, Outcome, SharedCatalog};
use crate::task_metrics::TaskMetrics;
use crate::task_transition::{TaskTransition, TransitionNote, TransitionObserver};

/// How a replica's workers behave.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Consumer name of this replica in the queue (unique per replica).
    pub worker_id: String,
    /// Jobs running at once; 0 = this replica runs no tasks (it still serves them).
    pub max_running: usize,
    /// Lease length; renewed every third of it.
    pub lease: Duration,
    /// Executions started per task before it fails.
    pub max_attempts: u32,
    /// Longest wait of one queue read.
    pub read_block: Duration,
    /// How long a task whose tool no replica knows goes round before it fails (a rolling
    /// upgrade adding the tool should finish within it).
    pub unknown_tool_grace: Duration,
    /// Where task events are counted.
    pub metrics: Arc<TaskMetrics>,
    /// Whether recorded results count against their creators' stored-bytes quota
    /// (`limits.max_stored_bytes` is set).
    pub count_stored_bytes: bool,
    /// Links a run's span to the span of the request that created its task, given that
    /// request's `traceparent` (the span exporter knows how; `None` when nothing is exported).
    pub trace_link: Option<TraceLink>,
    /// Told of every task transition this replica's workers make (the audit trail); `None`
    /// when nobody listens.
    pub transitions: Option<Arc<dyn TransitionObserver>>,
}

impl WorkerOptions {
    /// Reports a transition to the observer, if there is one.
    pub(crate) fn report(&self, note: &TransitionNote<'_>) {
        if let Some(observer) = &self.transitions {
            observer.transition(note);
        }
    }
}

/// Adds a link to a span from a W3C `traceparent`: how a run on one replica points at the
/// creation on another, in the exporter's terms.
#[derive(Clone)]
pub struct TraceLink(pub Arc<LinkFn>);

/// The function behind a [`TraceLink`]: the span, and the `traceparent` to link it to.
pub type LinkFn = dyn Fn(&tracing::Span, &str) + Send + Sync;

impl std::fmt::Debug for TraceLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TraceLink")
    }
}

/// A call that became a task while it ran, handed to [`Workers::adopt`].
#[derive(Debug)]
pub struct Adopted {
    /// Its job.
    pub job: Job,
    /// The lease the creation gave this replica.
    pub lease: mcpgate_store::Lease,
    /// The task as created.
    pub task: mcpgate_store::TaskRecord,
    /// When the creation was sent (the lease runs from no earlier).
    pub sent_at: tokio::time::Instant,
    /// The tool's progress messages.
    pub status: tokio::sync::watch::Receiver<Option<StatusNote>>,
    /// Stops the tool.
    pub cancel: CancellationToken,
    /// Whether the tool may run again after an interruption.
    pub retry_safe: bool,
    /// Set once the run records a checkpoint (shared with its `Checkpoints`, if it has any).
    pub checkpointed: Arc<std::sync::atomic::AtomicBool>,
}

/// Turns a tool failure into the JSON-RPC error a failed task carries (the gateway supplies
/// it, so codes are decided in one place).
pub type ErrorMapper = Arc<dyn Fn(&Failure) -> ErrorObject + Send + Sync>;

#[derive(Clone)]
struct Shared {
    store: AnyStore,
    catalog: SharedCatalog,
    options: WorkerOptions,
    errors: ErrorMapper,
    slots: Arc<Semaphore>,
    /// Runs in progress (slots also count the reader's reservation while it waits for jobs).
    running: Arc<AtomicUsize>,
    runs: TaskTracker,
    /// Stop taking jobs (shutdown began).
    stopping: CancellationToken,
    /// Take no jobs while set (an operator drains this replica); running ones go on.
    draining: Arc<tokio::sync::watch::Sender<bool>>,
    /// Abandon running jobs (grace period over).
    shutdown: CancellationToken,
}

/// Running workers.
pub struct Workers {
    shared: Shared,
    loops: TaskTracker,
    runs: TaskTracker,
    alive: Arc<AtomicBool>,
    running: Arc<AtomicUsize>,
}

impl std::fmt::Debug for Workers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workers").field("worker_id", &self.shared.options.worker_id).finish_non_exhaustive()
    }
}

impl Workers {
    /// Starts the reader and reclaim loops. They take no new jobs once `stopping` is
    /// cancelled; running jobs are stopped and handed back once `shutdown` is.
    pub fn start(
        store: AnyStore,
        catalog: SharedCatalog,
        options: WorkerOptions,
        errors: ErrorMapper,
        stopping: CancellationToken,
        shutdown: CancellationToken,
    ) -> Self {
        let max_running = options.max_running;
        let slots = Arc::new(Semaphore::new(max_running));
        let shared = Shared {
            store,
            catalog,
            options,
            errors,
            slots,
            running: Arc::new(AtomicUsize::new(0)),
            runs: TaskTracker::new(),
            stopping,
            shutdown,
            draining: Arc::new(tokio::sync::watch::Sender::new(false)),
        };
        let alive = Arc::new(AtomicBool::new(true));
        let loops = TaskTracker::new();
        if max_running > 0 {
            loops.spawn(read_loop(shared.clone(), alive.clone()));
            loops.spawn(reclaim_loop(shared.clone()));
        }
        loops.close();
        Self { runs: shared.runs.clone(), running: shared.running.clone(), shared, loops, alive }
    }

    /// Whether the queue reader is running.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// This replica's name in the job queue (the holder of the leases it takes).
    pub fn worker_id(&self) -> &str {
        &self.shared.options.worker_id
    }

    /// The lease length.
    pub fn lease(&self) -> Duration {
        self.shared.options.lease
    }

    /// Takes over a call that became a task while it ran (`TaskStore::create_running`, sent at
    /// `sent_at`) on `slot`, held until the run ends (so adopted runs count against
    /// `max_running` like any other): from now on it is watched like any run (its lease
    /// renewed, cancellation, expiry and shutdown obeyed through `cancel`) and its outcome
    /// recorded. `status` carries its progress messages.
    pub fn adopt(
        &self,
        slot: Slot,
        adopted: Adopted,
        call: impl Future<Output = Outcome<CallToolResult>> + Send + 'static,
    ) {
        let shared = self.shared.clone();
        let counted = Counted::new(shared.running.clone());
        let span = tracing::info_span!("task", task = %adopted.task.id, tool = %adopted.task.tool, attempt = 1);
        self.shared.runs.spawn(tracing::Instrument::instrument(
            async move {
                let events = match shared.store.subscribe(&adopted.task.id).await {
                    Ok(sub) => Some(sub),
                    Err(e) => {
                        tracing::warn!(
                            error = &e as &dyn std::error::Error,
                            "no cancel events for this run; lease renewals will notice instead"
                        );
                        None
                    }
                };
                let run = execution::Run {
                    job: adopted.job,
                    lease: adopted.lease,
                    task: adopted.task,
                    held_until: adopted.sent_at + shared.options.lease,
                    events,
                    status: adopted.status,
                    cancel: adopted.cancel,
                    retry_safe: adopted.retry_safe,
                    checkpointed: adopted.checkpointed,
                    // Its call answered the client already (with its task).
                    teller: run_end::Teller::default(),
                };
                shared.options.report(&TransitionNote::of(&run.task, TaskTransition::Working));
                execution::supervise(&shared, run, call).await;
                drop(counted);
                drop(slot);
            },
            span,
        ));
    }

    /// Takes a free run slot for a task this replica is about to create and run at once
    /// (`TaskStore::create_running`, then [`Workers::run_created`] or [`Workers::adopt`]);
    /// `None` when every slot is taken, the replica runs no tasks, is drained or is shutting
    /// down: a created task then goes to the queue, and a call cannot become a task here. (The
    /// queue reader holds one slot while it waits for jobs, so a replica with one slot runs
    /// everything through the queue.)
    pub fn reserve(&self) -> Option<Slot> {
        if self.shared.stopping.is_cancelled() || self.is_draining() {
            return None;
        }
        self.shared.slots.clone().try_acquire_owned().ok().map(|permit| Slot { _permit: permit })
    }

    /// Runs a task this replica just created running on `slot` (sent at `sent_at`), like a
    /// claimed job: its lease renewed, cancellation, expiry and shutdown obeyed, its outcome
    /// recorded. The watch says how the run ended once its outcome is stored (dropping it
    /// changes nothing for the run).
    pub fn run_created(
        &self,
        slot: Slot,
        lease: mcpgate_store::Lease,
        job: Job,
        task: mcpgate_store::TaskRecord,
        sent_at: tokio::time::Instant,
    ) -> RunWatch {
        let (teller, watch) = run_end::Teller::pair();
        let shared = self.shared.clone();
        let counted = Counted::new(shared.running.clone());
        let span = tracing::info_span!("task", task = %task.id, tool = %task.tool, attempt = 1);
        self.shared.runs.spawn(tracing::Instrument::instrument(
            async move {
                let held_until = sent_at + shared.options.lease;
                execution::execute(&shared, job, lease, task, held_until, teller).await;
                drop(counted);
                drop(slot);
            },
            span,
        ));
        watch
    }

    /// Drains this replica (`true`): it claims no more jobs (from the queue, by takeover, or
    /// tasks it creates itself, which go to the queue) while its running tasks go on to their
    /// end; `false` takes jobs again. It still serves every request meanwhile.
    pub fn drain(&self, on: bool) {
        self.shared.draining.send_replace(on);
    }

    /// Whether this replica is drained (see [`Workers::drain`]).
    pub fn is_draining(&self) -> bool {
        *self.shared.draining.borrow()
    }

    /// Jobs running right now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Whether every run slot is taken (never for a replica that runs no tasks: other
    /// replicas run its tasks).
    pub fn is_saturated(&self) -> bool {
        let max = self.shared.options.max_running;
        max > 0 && self.running() >= max
    }

    /// Waits for the loops and every run to end; call once `stopping` is cancelled (no new
    /// runs start after that).
    pub async fn finished(&self) {
        self.runs.close();
        self.loops.wait().await;
        self.runs.wait().await;
    }

    /// [`Workers::finished`], waiting at most `timeout`.
    pub async fn stopped(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.finished()).await;
    }
}

/// Reads new jobs while there is room to run them.
async fn read_loop(shared: Shared, alive: Arc<AtomicBool>) {
    let mut backoff = Duration::from_millis(100);
    let mut draining = shared.draining.subscribe();
    loop {
        if *draining.borrow_and_update() {
            // A read the server still holds (or a cluster's shard readers) would take jobs for
            // a worker that runs none: end it, hand back what was taken; a later read resumes.
            shared.store.stop_reading().await;
            tokio::select! {
                biased;
                () = shared.stopping.cancelled() => break,
                _ = draining.wait_for(|on| !*on) => continue,
            }
        }
        let first = tokio::select! {
            biased;
            () = shared.stopping.cancelled() => break,
            permit = shared.slots.clone().acquire_owned() => match permit { Ok(p) => p, Err(_) => break },
        };
        let room = 1 + shared.slots.available_permits().min(31);
        let read = tokio::select! {
            read = shared.store.read(&shared.options.worker_id, room, shared.options.read_block) => read,
            () = shared.stopping.cancelled() => break,
        };
        match read {
            Ok(jobs) => {
                backoff = Duration::from_millis(100);
                let mut first = Some(first);
                let mut surplus = Vec::new();
                for job in jobs {
                    // Redis caps a multi-stream read per stream, so it may return more than
                    // there is room for: those go back to the queue at once, for a replica
                    // with free slots, rather than waiting here behind running work.
                    let permit = first.take().or_else(|| shared.slots.clone().try_acquire_owned().ok());
                    match permit {
                        // Read just before a drain: back to the queue, for another replica.
                        Some(permit) if !shared.stopping.is_cancelled() && !*shared.draining.borrow() => {
                            spawn_run(&shared, job, permit, false);
                        }
                        _ => surplus.push(job),
                    }
                }
                if !surplus.is_empty() {
                    tracing::debug!(jobs = surplus.len(), "handing back jobs read beyond the free slots");
                    if let Err(e) = shared.store.hand_back(&surplus).await {
                        // Still pending on this worker: reclaimed once idle for a lease.
                        tracing::warn!(error = &e as &dyn std::error::Error, "handing back surplus jobs failed");
                    }
                }
            }
            Err(e) => {
                drop(first);
                tracing::warn!(error = &e as &dyn std::error::Error, "reading the job queue failed; retrying");
                tokio::select! {
                    () = tokio::time::sleep(backoff) => {}
                    () = shared.stopping.cancelled() => break,
                }
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
    // A read abandoned above may still wait in Redis: end it, or it would take the next job
    // (such as a task this replica hands back) for a worker that no longer runs anything.
    shared.store.stop_reading().await;
    alive.store(false, Ordering::Release);
}

/// How often a replica tidies the queue's list of workers, and how long a worker that holds
/// nothing must have been silent to be forgotten (a replaced replica).
const FORGET_EVERY: Duration = Duration::from_secs(600);
const FORGET_AFTER: Duration = Duration::from_secs(3600);

/// Takes over jobs whose worker stopped renewing (it died, or lost Redis), and now and then
/// forgets workers long gone.
async fn reclaim_loop(shared: Shared) {
    let every = (shared.options.lease / 2).max(Duration::from_millis(100));
    let mut next_forget = tokio::time::Instant::now() + FORGET_EVERY;
    loop {
        tokio::select! {
            () = tokio::time::sleep(every) => {}
            () = shared.stopping.cancelled() => return,
        }
        if tokio::time::Instant::now() >= next_forget {
            next_forget = tokio::time::Instant::now() + FORGET_EVERY;
            let after = FORGET_AFTER.max(shared.options.lease * 10);
            match shared.store.forget_idle_workers(after).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(workers = n, "forgot queue workers idle for over {after:?}"),
                Err(e) => tracing::warn!(error = &e as &dyn std::error::Error, "tidying the queue's workers failed"),
            }
        }
        // Free slots, not free permits: the reader holds a permit while it waits for jobs.
        let room = shared.options.max_running.saturating_sub(shared.running.load(Ordering::Relaxed));
        if room == 0 || *shared.draining.borrow() {
            continue;
        }
        match shared.store.reclaim(&shared.options.worker_id, shared.options.lease, room).await {
            Ok(jobs) => {
                for job in jobs {
                    let Some(permit) = wait_for_slot(&shared).await else { break };
                    tracing::info!(task = %job.task, "reclaimed a job whose worker stopped");
                    spawn_run(&shared, job, permit, true);
                }
            }
            Err(e) => tracing::warn!(error = &e as &dyn std::error::Error, "reclaiming stale jobs failed"),
        }
    }
}

/// A free run slot, or `None` once shutdown began.
async fn wait_for_slot(shared: &Shared) -> Option<tokio::sync::OwnedSemaphorePermit> {
    tokio::select! {
        biased;
        () = shared.stopping.cancelled() => None,
        permit = shared.slots.clone().acquire_owned() => permit.ok(),
    }
}

/// Runs a job on its own task; `reclaimed` when it was taken over from another worker.
fn spawn_run(shared: &Shared, job: Job, permit: tokio::sync::OwnedSemaphorePermit, reclaimed: bool) {
    let run_shared = shared.clone();
    let counted = Counted::new(shared.running.clone());
    shared.runs.spawn(async move {
        execution::run(&run_shared, job, reclaimed).await;
        drop(counted);
        drop(permit);
    });
}

/// A run slot taken by [`Workers::reserve`]; given back when dropped.
#[derive(Debug)]
pub struct Slot {
    _permit: tokio::sync::OwnedSemaphorePermit,
}

/// One run in the `running` count, for as long as it lives (even if the run panics).
struct Counted(Arc<AtomicUsize>);

impl Counted {
    fn new(count: Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::Relaxed);
        Self(count)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
