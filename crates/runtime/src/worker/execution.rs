//! One job, start to end: claim the task, run its tool under the watchdog, record what came
//! out (a result, a failure, or a request for input; retried with the same lease while the
//! store is unreachable, for a bounded time), or let go when told to stop (handing the task
//! back on shutdown, or to another replica when this one does not know the tool).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::input::{InputResponse, InputResponses};
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{
    Claim, EventBus as _, Job, JobQueue as _, Lease, RawAnswer, Settled, StatusNote, StoreError, TaskOutcome,
    TaskRecord, TaskStore as _,
};

use super::Shared;
use super::run_end::{RunEnd, Teller};
use super::watchdog::{Stop, watch};
use crate::catalog::{Checkpoints, Failure, Outcome, ToolCall, ToolContext, missing_capabilities};
use crate::principal::Principal;
use crate::task_metrics::TaskMetric;
use crate::task_transition::{TaskTransition, TransitionNote};

/// Runs one job (`reclaimed`: taken over from a worker that stopped renewing), in a `task`
/// span that carries the task id from the claim on (tool and attempt once claimed); the
/// events inside do not repeat it.
pub(super) async fn run(shared: &Shared, job: Job, reclaimed: bool) {
    let span =
        tracing::info_span!("task", task = %job.task, tool = tracing::field::Empty, attempt = tracing::field::Empty);
    tracing::Instrument::instrument(claim_and_execute(shared, job, reclaimed), span).await;
}

async fn claim_and_execute(shared: &Shared, job: Job, reclaimed: bool) {
    let options = &shared.options;
    // The lease runs from no earlier than now (Redis's clock starts it when the claim lands).
    let claimed_at = tokio::time::Instant::now();
    let claim = shared.store.claim(&job, &options.worker_id, options.lease, options.max_attempts).await;
    let (lease, task) = match claim {
        Ok(Claim::Run { lease, task }) => {
            // An attempt past the first means an earlier run never settled: a takeover, whether
            // its job was reclaimed here or its lapsed run-where-created lease was enqueued.
            if reclaimed || task.attempts > 1 {
                options.metrics.count(&task.tool, TaskMetric::Reclaimed);
            }
            (lease, *task)
        }
        Ok(Claim::Exhausted { tool }) => {
            tracing::warn!("task failed: no attempt finished");
            options.metrics.count(&tool, TaskMetric::Failed);
            options.report(&TransitionNote::bare(job.task.as_str(), &tool, TaskTransition::Failed));
            return;
        }
        Ok(Claim::Skip(why)) => {
            tracing::debug!(?why, "job skipped");
            if why == mcpgate_store::Skip::Gone {
                options.metrics.count("", TaskMetric::Expired);
                options.report(&TransitionNote::bare(job.task.as_str(), "", TaskTransition::Expired));
            }
            return;
        }
        // The job stays pending; it is reclaimed once it has been idle for a lease. A claim
        // too few Redis replicas confirmed (`store.replicas_ack`, after the store's retries
        // under the same claim id) is not run either: a failover could hand the same job to
        // another worker, running the tool twice.
        Err(e @ StoreError::NotAcknowledged { .. }) => {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "claim not confirmed by the Redis replicas; left to be reclaimed"
            );
            return;
        }
        Err(e) => {
            tracing::warn!(error = &e as &dyn std::error::Error, "claiming a job failed");
            return;
        }
    };
    let span = tracing::Span::current();
    span.record("tool", task.tool.as_str());
    span.record("attempt", task.attempts);
    // Queued work runs in a trace of its own, linked to the request that created it.
    if let (Some(link), Some(parent)) = (&options.trace_link, &task.trace) {
        (link.0)(&span, parent);
    }
    execute(shared, job, lease, task, claimed_at + options.lease, Teller::default()).await;
}

/// Pause before giving a task with an unknown tool back, so replicas that do not know it do
/// not pass it round in a busy loop.
const DEFER_PAUSE: Duration = Duration::from_millis(500);

/// Gives back a task whose tool this replica does not know (another replica may, e.g. during
/// a rolling upgrade), or fails it once no replica ran it within the grace period.
async fn defer_unknown(shared: &Shared, job: &Job, lease: &Lease, task: &TaskRecord) {
    tokio::time::sleep(DEFER_PAUSE.min(shared.options.lease / 3)).await;
    let failure = Failure::InvalidParams(format!(
        "Unknown tool: {} (no replica that knows it ran this task within {} s)",
        task.tool,
        shared.options.unknown_tool_grace.as_secs()
    ));
    let error = serde_json::to_string(&(shared.errors)(&failure))
        .unwrap_or_else(|_| r#"{"code":-32602,"message":"Unknown tool"}"#.to_owned());
    match shared.store.defer(lease, job, shared.options.unknown_tool_grace, &error).await {
        Ok(Settled::Done) => tracing::info!(tool = %task.tool, "tool unknown here; task left for another replica"),
        Ok(Settled::GaveUp) => {
            tracing::warn!(tool = %task.tool, "no replica ran the task's tool within the grace period; task failed");
            shared.options.metrics.count(&task.tool, TaskMetric::Failed);
            shared.options.report(&TransitionNote::of(task, TaskTransition::Failed));
        }
        Ok(other) => tracing::debug!(?other, "task with an unknown tool moved on meanwhile"),
        // The lease lapses and the job is reclaimed, by this or another replica.
        Err(e) => {
            tracing::warn!(error = &e as &dyn std::error::Error, "giving back a task with an unknown tool failed")
        }
    }
}

/// Runs a claimed task (or one created running here) under `lease`, held surely until
/// `held_until`; `teller` tells the task's creator how it ended, if it listens.
pub(super) async fn execute(
    shared: &Shared,
    job: Job,
    lease: Lease,
    task: TaskRecord,
    held_until: tokio::time::Instant,
    mut teller: Teller,
) {
    // Subscribe before the tool starts, so a cancel between now and then is not missed.
    let events = match shared.store.subscribe(&task.id).await {
        Ok(sub) => Some(sub),
        Err(e) => {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "no cancel events for this run; lease renewals will notice instead"
            );
            None
        }
    };
    // The task acts with the authority its creator had when it was created, and with the
    // creator's token where the task kept it (an upstream that exchanges it on every call).
    // Its key is the creator's, so a tool of theirs alone (an `auth = "oauth"` upstream's,
    // used with their own connection) is found here too, on any replica.
    let credential = task.credential.as_deref().map(crate::Credential::bearer);
    let principal = Principal::with_credential(&task.issuer, &task.subject, task.scopes.clone(), credential);
    let catalog = shared.catalog.load();
    let Some((tool, _)) = catalog.find(&task.tool, &principal).await else {
        defer_unknown(shared, &job, &lease, &task).await;
        return;
    };
    let retry_safe = tool.descriptor().retry_safe;
    if task.attempts > 1 && !retry_safe && !task.resumable {
        // An earlier run started and never recorded an outcome (its replica died): the tool
        // may have acted, and running it again could act twice. (A run that left a checkpoint
        // is resumed from it instead: the checkpoint says what not to redo.)
        tracing::warn!("task run interrupted earlier; the tool is not retry-safe, so the task fails");
        settle(shared, &job, &lease, Outcome::Failed(interrupted(&task.tool)), &task, &mut teller).await;
        return;
    }
    let call = match build_call(&task) {
        Ok(call) => call,
        Err(failure) => {
            settle(shared, &job, &lease, Outcome::Failed(failure), &task, &mut teller).await;
            return;
        }
    };
    let capabilities: ClientCapabilities = serde_json::from_str(&task.capabilities).unwrap_or_default();
    let (status_tx, status_rx) = watch::channel(None);
    let cancel = shared.shutdown.child_token();
    let checkpointed = Arc::new(AtomicBool::new(task.resumable));
    let cx = ToolContext::for_task(principal, capabilities.into(), status_tx, cancel.clone())
        .with_changes(shared.store.clone())
        .with_server(task.server.as_deref())
        .with_checkpoints(Checkpoints::new(shared.store.clone(), lease.clone(), checkpointed.clone()));
    tracing::debug!("task run started");
    shared.options.report(&TransitionNote::of(&task, TaskTransition::Working));
    let run = Run { job, lease, task, held_until, events, status: status_rx, cancel, retry_safe, checkpointed, teller };
    supervise(shared, run, tool.call(call, &cx)).await;
}

/// A run under way: what `supervise` watches and records.
pub(super) struct Run {
    pub(super) job: Job,
    pub(super) lease: Lease,
    pub(super) task: TaskRecord,
    /// Until when the lease is surely held (from where the claim was sent).
    pub(super) held_until: tokio::time::Instant,
    pub(super) events: Option<mcpgate_store::Subscription>,
    /// The tool's latest progress message.
    pub(super) status: watch::Receiver<Option<StatusNote>>,
    /// Stops the tool.
    pub(super) cancel: tokio_util::sync::CancellationToken,
    pub(super) retry_safe: bool,
    /// Set once the run's tool recorded a checkpoint (or the run resumed from one): it can then
    /// be handed back on shutdown even when the tool is not retry-safe.
    pub(super) checkpointed: Arc<AtomicBool>,
    /// Tells the task's creator how the run ended, if it listens.
    pub(super) teller: Teller,
}

/// How long a cancelled (or expired) task's tool may go on to see its cancellation (and start
/// cancelling what it started elsewhere) before it is dropped.
const CANCEL_GRACE: Duration = Duration::from_millis(500);

/// Watches a run (renewing its lease, watching for cancellation, expiry and shutdown) until
/// its tool ends, then records the outcome; or stops the tool and lets go of the task.
pub(super) async fn supervise(
    shared: &Shared,
    run: Run,
    tool: impl std::future::Future<Output = Outcome<mcpgate_protocol::tool::CallToolResult>>,
) {
    let Run { job, lease, task, held_until, events, status: status_rx, cancel, retry_safe, checkpointed, mut teller } =
        run;
    let resumable = || retry_safe || checkpointed.load(Ordering::Acquire);
    let expires = task.ttl_ms.map(|ttl| {
        let left = task.created_ms.saturating_add(ttl).saturating_sub(wall_clock_ms());
        tokio::time::Instant::now() + std::time::Duration::from_millis(left.saturating_add(50))
    });
    let mut tool = std::pin::pin!(tool);
    let ended = tokio::select! {
        // The watchdog first: when both are ready, a stop (shutdown, cancel) wins.
        biased;
        stop = watch(shared, &lease, status_rx, events, expires, held_until) => Err(stop),
        outcome = &mut tool => Ok(outcome),
    };
    cancel.cancel();
    if matches!(ended, Err(Stop::Cancelled | Stop::Gone)) {
        // The task is over: the tool gets a moment to see its cancellation and stop what it
        // started elsewhere (an upstream call or task); what it returns is not recorded.
        let _ = tokio::time::timeout(CANCEL_GRACE, &mut tool).await;
    }
    // The tool sees shutdown through its cancellation token and may end at once, failing: that
    // is not the task's outcome, so the task is handed back like any run stopped by shutdown.
    // A result it did produce is kept.
    let ended = match ended {
        Ok(Outcome::Failed(_)) if shared.shutdown.is_cancelled() => Err(Stop::Shutdown),
        other => other,
    };
    match ended {
        Ok(outcome) => settle(shared, &job, &lease, outcome, &task, &mut teller).await,
        // Shutting down mid-call with a tool that must not run twice: the call was stopped
        // and may have acted, so the task ends here.
        Err(Stop::Shutdown) if !resumable() => {
            settle(shared, &job, &lease, Outcome::Failed(interrupted(&task.tool)), &task, &mut teller).await;
        }
        // Shutting down: hand the task back so another replica runs it now, not once the
        // lease has lapsed, and without spending one of its attempts.
        Err(Stop::Shutdown) => match shared.store.release(&lease, &job).await {
            Ok(Settled::Done) => tracing::info!("task handed back for another replica (shutdown)"),
            Ok(other) => tracing::debug!(?other, "task not handed back: it moved on meanwhile"),
            Err(e) => tracing::warn!(
                error = &e as &dyn std::error::Error,
                "handing a task back failed; it is taken over once its lease lapses"
            ),
        },
        Err(Stop::LeaseEnding) => {
            // Not acknowledged: once the lease lapses, any replica reclaims the job.
            tracing::warn!("task run stopped: its lease could not be renewed and was about to lapse");
        }
        Err(stop) => {
            tracing::info!(?stop, "task run stopped before its tool finished");
            if stop == Stop::Gone {
                shared.options.metrics.count(&task.tool, TaskMetric::Expired);
                shared.options.report(&TransitionNote::of(&task, TaskTransition::Expired));
            }
            if matches!(stop, Stop::Cancelled | Stop::Gone)
                && let Err(e) = shared.store.ack(&job).await
            {
                tracing::warn!(error = &e as &dyn std::error::Error, "acknowledging a stopped job failed");
            }
        }
    }
}

/// The failure of a task whose tool must not run twice and whose run was interrupted.
fn interrupted(tool: &str) -> Failure {
    Failure::Unavailable(format!(
        "Task interrupted: the gateway replica running {tool} stopped before the call finished; {tool} is not \
         marked idempotent, so it was not run again (it may or may not have taken effect)"
    ))
}

/// Milliseconds since the Unix epoch.
fn wall_clock_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn build_call(task: &TaskRecord) -> Result<ToolCall, Failure> {
    let arguments: Value = serde_json::from_str(&task.arguments)
        .map_err(|_| Failure::Internal("stored task arguments are not JSON".to_owned()))?;
    let mut input_responses = InputResponses::new();
    for (key, answer) in &task.input_responses {
        // Decoded as a result of the method it answers; the store checked its shape, but a
        // client can still send what no tool could read.
        let mut de = serde_json::Deserializer::from_str(&answer.json);
        let decoded = InputResponse::decode_for(&answer.method, &mut de).map_err(|_| {
            Failure::InvalidParams(format!(
                "the answer to input request {key:?} is not a valid {} result",
                answer.method
            ))
        })?;
        input_responses.insert(key.clone(), decoded);
    }
    let state = match &task.state {
        Some(json) => {
            Some(serde_json::from_str(json).map_err(|_| Failure::Internal("stored state is not JSON".to_owned()))?)
        }
        None => None,
    };
    Ok(ToolCall { arguments, input_responses, state })
}

/// Records the outcome of a run under its lease, in a `settle` span of the run's, then tells
/// the task's creator (if it listens) how the run ended, once the store recorded it.
async fn settle(
    shared: &Shared,
    job: &Job,
    lease: &Lease,
    outcome: Outcome<mcpgate_protocol::tool::CallToolResult>,
    task: &TaskRecord,
    teller: &mut Teller,
) {
    // Inside the run's `task` span, which names the task already.
    let span = tracing::info_span!("settle");
    tracing::Instrument::instrument(settle_in_span(shared, job, lease, outcome, task, teller), span).await;
}

async fn settle_in_span(
    shared: &Shared,
    job: &Job,
    lease: &Lease,
    outcome: Outcome<mcpgate_protocol::tool::CallToolResult>,
    task: &TaskRecord,
    teller: &mut Teller,
) {
    let store = &shared.store;
    // A task's tool refusing its arguments ends it `completed` with that result (`failed` to a
    // 2025-11-25 reader, who reads tool errors so), as a synchronous call answers.
    let (settled, ended, end) = match outcome.refused_arguments_as_result() {
        Outcome::Complete(mut result) => {
            // Stored era-neutral; each era's reader adds its own envelope fields.
            result.result_type = None;
            result.meta = None;
            let tool_error = result.is_error == Some(true);
            match serde_json::to_string(&result) {
                Ok(json) => {
                    let settled = persist(shared, || {
                        store.finish(lease, job, TaskStatus::Completed, TaskOutcome::Result(json.clone()), tool_error)
                    })
                    .await;
                    if matches!(settled, Ok(Settled::Done)) && shared.options.count_stored_bytes {
                        charge_result(shared, task, json.len()).await;
                    }
                    (settled, Some(TaskTransition::Completed { tool_error }), RunEnd::Completed(Box::new(result)))
                }
                Err(e) => {
                    let (settled, error) =
                        failed(shared, job, lease, &Failure::Internal(format!("unserializable result: {e}"))).await;
                    (settled, Some(TaskTransition::Failed), RunEnd::Failed(error))
                }
            }
        }
        Outcome::Failed(failure) => {
            let (settled, error) = failed(shared, job, lease, &failure).await;
            (settled, Some(TaskTransition::Failed), RunEnd::Failed(error))
        }
        Outcome::NeedInput { requests, state } => {
            let capabilities: ClientCapabilities = serde_json::from_str(&task.capabilities).unwrap_or_default();
            let refuse = if let Some(failure) = missing_capabilities(&capabilities, &requests) {
                Some(failure)
            } else if let Some(key) = requests.keys().find(|k| task.input_responses.contains_key(*k)) {
                // Keys name requests for the task's whole life: a client may still hold an
                // answer to the earlier one.
                Some(Failure::Internal(format!("tool {} asked again for input key {key:?}", task.tool)))
            } else if requests.is_empty() {
                Some(Failure::Internal(format!("tool {} asked for input but named none", task.tool)))
            } else {
                None
            };
            let mut raw = mcpgate_store::RawRequests::new();
            let refuse = refuse.or_else(|| {
                requests.iter().find_map(|(key, request)| match serde_json::to_string(request) {
                    Ok(json) => {
                        raw.insert(key.clone(), RawAnswer { method: request.method().to_owned(), json });
                        None
                    }
                    Err(e) => Some(Failure::Internal(format!("unserializable input request: {e}"))),
                })
            });
            match refuse {
                Some(failure) => {
                    let (settled, error) = failed(shared, job, lease, &failure).await;
                    (settled, Some(TaskTransition::Failed), RunEnd::Failed(error))
                }
                None => {
                    let state = state.map(|s| s.to_string());
                    let parked = persist(shared, || store.park(lease, job, &raw, state.as_deref())).await;
                    (parked, Some(TaskTransition::InputRequired), RunEnd::Parked)
                }
            }
        }
    };
    let stored = matches!(settled, Ok(Settled::Done));
    // Counted and audited before its creator can answer with it.
    record(shared, task, settled, ended);
    if stored {
        teller.tell(end);
    }
}

/// Counts a recorded result against its creator's stored-bytes quota (the creator's key as
/// the gateway counts it: issuer and subject, across sessions). Best effort: a result not
/// counted only lets its creator store a little more.
async fn charge_result(shared: &Shared, task: &TaskRecord, bytes: usize) {
    let creator = Principal::new(&task.issuer, &task.subject, Vec::new());
    if let Err(e) = shared.store.charge(creator.caller_key(), &task.id, bytes as u64).await {
        tracing::warn!(
            error = &e as &dyn std::error::Error,
            "counting a result against its creator's stored-bytes quota failed"
        );
    }
}

/// Logs how recording an outcome went, counts how the task ended and reports the transition
/// (`entered`: what was written).
fn record(
    shared: &Shared,
    task: &TaskRecord,
    settled: Result<Settled, mcpgate_store::StoreError>,
    entered: Option<TaskTransition>,
) {
    let metrics = &shared.options.metrics;
    match settled {
        Ok(Settled::Done) => {
            let ended = match entered {
                Some(TaskTransition::Completed { .. }) => Some(TaskMetric::Completed),
                Some(TaskTransition::Failed) => Some(TaskMetric::Failed),
                _ => None,
            };
            if let Some(ended) = ended {
                metrics.count(&task.tool, ended);
            }
            if let Some(entered) = entered {
                shared.options.report(&TransitionNote::of(task, entered));
            }
            tracing::debug!("task run recorded");
        }
        Ok(Settled::AlreadyTerminal) => tracing::debug!("task ended elsewhere first (e.g. cancelled); outcome dropped"),
        Ok(Settled::Lost) => tracing::info!("lease superseded; outcome dropped, the new holder decides"),
        Ok(Settled::Gone) => {
            metrics.count(&task.tool, TaskMetric::Expired);
            shared.options.report(&TransitionNote::of(task, TaskTransition::Expired));
            tracing::debug!("task expired before its outcome was recorded");
        }
        Ok(Settled::GaveUp) => tracing::warn!("unexpected answer to recording an outcome"),
        // The lease lapses and another attempt runs the task again.
        Err(e) => tracing::warn!(error = &e as &dyn std::error::Error, "recording a task outcome failed"),
    }
}

/// Records `failure` as the task's outcome; returns how that went and the JSON-RPC error
/// recorded.
async fn failed(
    shared: &Shared,
    job: &Job,
    lease: &Lease,
    failure: &Failure,
) -> (Result<Settled, mcpgate_store::StoreError>, mcpgate_protocol::ErrorObject) {
    if let Failure::Internal(detail) = failure {
        tracing::error!(%detail, "task failed internally");
    }
    let error = (shared.errors)(failure);
    let json =
        serde_json::to_string(&error).unwrap_or_else(|_| r#"{"code":-32603,"message":"Internal error"}"#.to_owned());
    let settled = persist(shared, || {
        shared.store.finish(lease, job, TaskStatus::Failed, TaskOutcome::Error(json.clone()), false)
    })
    .await;
    (settled, error)
}

/// Longest time an outcome's write is retried while the store does not answer: past it the
/// outcome is dropped and the task runs again once its lease lapsed.
fn persist_for(lease: Duration) -> Duration {
    (lease * 2).max(Duration::from_secs(10))
}

/// Writes an outcome, retrying with the same lease (safe: a repeat of a write that landed
/// changes nothing, and a newer lease holder's token refuses it) while the store is
/// unreachable, slow, or its replicas have not confirmed the write (`store.replicas_ack`),
/// for a bounded time, so a computed result is not lost to a blip.
async fn persist<F, Fut>(shared: &Shared, write: F) -> Result<Settled, StoreError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<Settled, StoreError>>,
{
    let give_up = tokio::time::Instant::now() + persist_for(shared.options.lease);
    let mut backoff = Duration::from_millis(50);
    loop {
        match write().await {
            // Not acknowledged by enough Redis replicas: the write may have landed on the
            // primary; repeating it under the same lease is safe and waits for them again.
            Err(
                e @ (StoreError::Unavailable { .. } | StoreError::Timeout { .. } | StoreError::NotAcknowledged { .. }),
            ) if tokio::time::Instant::now() + backoff < give_up => {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "recording a task outcome failed; retrying with the same lease"
                );
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            other => return other,
        }
    }
}
