//! Task methods of both eras, on one stored record: creating a task from `tools/call`,
//! `tasks/get`, `tasks/cancel`, and `tasks/update` (extension), `tasks/result` and
//! `tasks/list` (2025-11-25).
//!
//! Invariants: a task is found only by its owner (anyone else gets "not found", never
//! "forbidden"); `CreateTaskResult` is sent only after the store made the task durable; the
//! same call retried within the idempotency window returns the same task; every task is
//! created through [`create_record`] or [`create_adopted`], so admitted by `task_admission`
//! (quotas, task rate limits, worker slots); a legacy `tasks/result` waits on the task's
//! events, not by polling, within its caller's share of the replica's waiters.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;
use serde_json::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::{ClientCapabilities, TASKS_EXTENSION};
use mcpgate_protocol::input::InputResponses;
use mcpgate_protocol::pagination::PaginatedParams;
use mcpgate_protocol::result::{EmptyResult, ResultMeta, ResultType};
use mcpgate_protocol::task::{
    CreateTaskResult, LegacyCreateTaskResult, LegacyTaskResult, ListTasksResult, TaskIdParams, TaskStatus,
};
use mcpgate_store::{
    Cancelled, EventBus as _, ListCursor, NewTask, RawAnswer, RawAnswers, Read, TaskEvent, TaskId, TaskRecord,
    TaskStore as _,
};

use crate::config::AuthMode;
use crate::error::{GatewayError, clip};
use crate::limits::{self, Charge};
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::{Prepared, Work};
use mcpgate_runtime::task_metrics::TaskMetric;

use crate::mcp::render;
use crate::mcp::request_state::MAX_ANSWERS;
use crate::mcp::session::now_ms;
use crate::mcp::task_admission::{self, Way};
use crate::mcp::{answers, idempotency, task_input, task_view};
use crate::state::AppState;

/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 50;

/// A `tasks/result` waiter re-reads its task at least this often, should an event be lost
/// (pub/sub delivers at most once), and at most this often when its clock and Redis's
/// disagree about the expiry.
const RECHECK_MAX: Duration = Duration::from_secs(30);
const RECHECK_MIN: Duration = Duration::from_secs(1);

/// The lifetime a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::mcp) enum TtlRequest {
    /// None given: the configured default.
    Default,
    /// This many milliseconds (clamped).
    Millis(u64),
    /// `ttl: null`: unlimited, if allowed.
    Unlimited,
}

impl TtlRequest {
    /// Reads a legacy `params.task` value.
    pub(in crate::mcp) fn from_legacy(task: &Value) -> Result<Self, GatewayError> {
        match task.get("ttl") {
            None => Ok(Self::Default),
            Some(Value::Null) => Ok(Self::Unlimited),
            Some(v) => v
                .as_u64()
                .map(Self::Millis)
                .ok_or_else(|| GatewayError::invalid_params("task.ttl must be a non-negative integer")),
        }
    }
}

/// A task to create for a `tools/call`.
#[derive(Debug)]
pub(in crate::mcp) struct TaskPlan {
    pub(in crate::mcp) tool: String,
    /// The arguments (a JSON object).
    pub(in crate::mcp) arguments: Value,
    pub(in crate::mcp) ttl: TtlRequest,
    /// Answers gathered before the task could start (multi-round input), for its first run.
    pub(in crate::mcp) answers: InputResponses,
    /// The tool's continuation from those rounds.
    pub(in crate::mcp) state: Option<Value>,
    /// Whether the task keeps the caller's token for its runs (see
    /// [`AppState::keeps_credential`]).
    pub(in crate::mcp) keeps_credential: bool,
}

/// Creates the task and answers with `CreateTaskResult` in the request's era.
pub(in crate::mcp) async fn create(state: &AppState, cx: &CallContext, plan: TaskPlan) -> Result<Bytes, GatewayError> {
    render_created(state, cx, &create_record(state, cx, plan).await?)
}

/// Creates the planned task (or finds the one an idempotent retry names) and counts it. With
/// a free run slot here the task runs on this replica at once (run where created: no queue
/// round trips); otherwise it is enqueued for any replica.
pub(in crate::mcp) async fn create_record(
    state: &AppState,
    cx: &CallContext,
    plan: TaskPlan,
) -> Result<TaskRecord, GatewayError> {
    let task = new_task(state, cx, plan)?;
    let created = match task_admission::admit(state, cx, Way::Created).await?.slot {
        Some(slot) => {
            let sent_at = tokio::time::Instant::now();
            let (created, run) =
                state.store.create_running(task, state.workers.worker_id(), state.workers.lease()).await?;
            if let (mcpgate_store::Created::New(record), Some((lease, job))) = (&created, run) {
                state.workers.run_created(slot, lease, job, record.clone(), sent_at);
            }
            created
        }
        None => state.store.create(task).await?,
    };
    let new = matches!(created, mcpgate_store::Created::New(_));
    let Some(record) = created.into_record() else {
        return Err(GatewayError::invalid_params(
            "Idempotency-Key reused with different arguments: a key names one call (tool and arguments) within \
             tasks.idempotency_window_ms",
        ));
    };
    if new {
        state.task_metrics.count(&record.tool, TaskMetric::Created);
    }
    Ok(record)
}

/// A task made of a running call: what [`create_adopted`] hands to `Workers::adopt`.
pub(in crate::mcp) struct Adoption {
    pub(in crate::mcp) record: TaskRecord,
    pub(in crate::mcp) lease: mcpgate_store::Lease,
    pub(in crate::mcp) job: mcpgate_store::Job,
    /// The worker slot its run holds.
    pub(in crate::mcp) slot: mcpgate_runtime::worker::Slot,
}

/// Creates a task that runs on this replica from now on, never deduplicated (a call of a tool
/// of `upstream`, if any, that became a task while it ran), once admitted like any task (see
/// `task_admission`): refused, it creates nothing.
pub(in crate::mcp) async fn create_adopted(
    state: &AppState,
    cx: &CallContext,
    upstream: Option<&str>,
    task: NewTask,
) -> Result<Adoption, GatewayError> {
    let admitted = task_admission::admit(state, cx, Way::Adopted { upstream }).await?;
    let slot = admitted.slot.ok_or_else(|| GatewayError::internal("an adopted task was admitted without a slot"))?;
    // A retry of the call is a new call (it ran before its task existed): no deduplication.
    let task = NewTask { idempotency: None, ..task };
    match state.store.create_running(task, state.workers.worker_id(), state.workers.lease()).await? {
        (mcpgate_store::Created::New(record), Some((lease, job))) => Ok(Adoption { record, lease, job, slot }),
        _ => Err(GatewayError::internal("a task created without deduplication was not new")),
    }
}

/// The record to create for a planned task (with its idempotency scope).
pub(in crate::mcp) fn new_task(state: &AppState, cx: &CallContext, plan: TaskPlan) -> Result<NewTask, GatewayError> {
    let tasks = &state.config.tasks;
    let ttl_ms = match plan.ttl {
        TtlRequest::Default => Some(tasks.default_ttl_ms),
        // Very short lifetimes would expire before anyone could read the result.
        TtlRequest::Millis(t) => Some(t.clamp(1_000, tasks.max_ttl_ms)),
        TtlRequest::Unlimited if tasks.allow_unlimited_ttl => None,
        TtlRequest::Unlimited => Some(tasks.max_ttl_ms),
    };
    let arguments =
        serde_json::to_string(&plan.arguments).map_err(|e| GatewayError::internal(format!("arguments: {e}")))?;
    let capabilities =
        serde_json::to_string(&*cx.capabilities).map_err(|e| GatewayError::internal(format!("capabilities: {e}")))?;
    let mut input_responses = RawAnswers::new();
    for (key, answer) in &plan.answers {
        let json = serde_json::to_string(answer).map_err(|e| GatewayError::internal(format!("answer: {e}")))?;
        input_responses.insert(key.clone(), RawAnswer { method: answer.method().to_owned(), json });
    }
    // Arguments serialize with sorted keys, so the same call always has the same digest.
    let idempotency = idempotency::scope(cx, &plan.tool, &arguments, tasks.idempotency_window_ms);
    Ok(NewTask {
        owner: cx.principal.key().to_owned(),
        issuer: cx.principal.issuer().to_owned(),
        subject: cx.principal.subject().to_owned(),
        era: cx.era,
        tool: plan.tool,
        arguments,
        capabilities,
        scopes: cx.principal.scopes().to_vec(),
        ttl_ms,
        poll_interval_ms: tasks.poll_interval_ms,
        idempotency,
        index_horizon_ms: (!tasks.allow_unlimited_ttl).then_some(tasks.max_ttl_ms),
        // Only tasks/list reads the owner index, and it is served only behind authentication.
        indexed: state.config.auth.mode != AuthMode::None,
        quota: task_admission::quota(state, cx),
        input_responses,
        state: plan.state.map(|s| s.to_string()),
        credential: plan.keeps_credential.then(|| cx.principal.credential().map(|c| c.expose().to_owned())).flatten(),
        trace: crate::telemetry::traceparent(),
    })
}

/// `CreateTaskResult` for a task just created, in the request's era.
pub(in crate::mcp) fn render_created(
    state: &AppState,
    cx: &CallContext,
    record: &TaskRecord,
) -> Result<Bytes, GatewayError> {
    tracing::Span::current().record("task", record.id.as_str());
    tracing::debug!("task created");
    match cx.era {
        Era::Modern => {
            let result = CreateTaskResult {
                task: task_view::modern(record),
                result_type: Some(ResultType::Task),
                meta: Some(ResultMeta::server(state.server_info.clone())),
            };
            serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal(format!("task: {e}")))
        }
        Era::Legacy => {
            let result = LegacyCreateTaskResult { task: task_view::legacy(record), result_type: None, meta: None };
            serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal(format!("task: {e}")))
        }
    }
}

/// `tasks/get`.
pub(in crate::mcp) async fn get(
    state: &AppState,
    cx: &CallContext,
    params: &TaskIdParams,
) -> Result<Bytes, GatewayError> {
    require_extension(cx)?;
    // Only what is rendered: a modern view carries the outcome inline, a legacy one does not.
    let read = if cx.era == Era::Modern { Read::WithOutcome } else { Read::Control };
    // The poll limit is checked alongside the read (no added latency): past its burst the
    // poll is still answered, with a longer poll interval saying when to come back.
    let (record, advice) =
        tokio::join!(find(state, cx, &params.task_id, read), limits::admit(state, &cx.principal, Charge::Poll));
    let (mut record, advice) = (record?, advice?);
    if !advice.is_zero() && !record.status.is_terminal() {
        let advice_ms = u64::try_from(advice.as_millis()).unwrap_or(u64::MAX).saturating_add(1);
        record.poll_interval_ms = record.poll_interval_ms.max(advice_ms);
    }
    match cx.era {
        Era::Modern => render::complete(state, cx, task_view::detailed(&record)?),
        Era::Legacy => legacy_task(state, cx, &record),
    }
}

/// `tasks/cancel`: an empty ack (extension, idempotent), or the task (2025-11-25, which
/// refuses to cancel a finished task).
pub(in crate::mcp) async fn cancel(
    state: &AppState,
    cx: &CallContext,
    params: &TaskIdParams,
) -> Result<Bytes, GatewayError> {
    require_extension(cx)?;
    let id = parse_id(&params.task_id)?;
    let cancelled =
        crate::mcp::task_cancel::cancel(&state.store, Some(&state.task_metrics), &id, cx.principal.key()).await?;
    match (cancelled, cx.era) {
        (Cancelled::NotFound, _) => Err(not_found(&params.task_id)),
        (_, Era::Modern) => render::complete(state, cx, EmptyResult::default()),
        (Cancelled::Now(record), Era::Legacy) => legacy_task(state, cx, &record),
        (Cancelled::AlreadyTerminal(record), Era::Legacy) => {
            Err(GatewayError::TaskTerminal { task: record.id.to_string(), status: record.status.as_str() })
        }
    }
}

/// `tasks/update` (extension): records answers to the caller's parked task (one round trip):
/// answers to keys not outstanding are ignored, and the task resumes on any replica once
/// nothing is outstanding. An answer that does not fit its request is -32602, and then
/// nothing is recorded.
pub(in crate::mcp) async fn update(
    state: &AppState,
    cx: &CallContext,
    params: &mcpgate_protocol::task::UpdateTaskParams,
) -> Result<Bytes, GatewayError> {
    require_extension(cx)?;
    let id = parse_id(&params.task_id)?;
    if params.input_responses.len() > MAX_ANSWERS {
        return Err(GatewayError::invalid_params(format!("at most {MAX_ANSWERS} inputResponses per request")));
    }
    let answers = answers::check(state, params.input_responses.iter().map(|(k, v)| (k.clone(), v.to_string())))?;
    match answers::record(state, &id, cx.principal.key(), &answers, |key| format!("inputResponses.{}", clip(key))).await
    {
        Err(GatewayError::TaskNotFound { .. }) => Err(not_found(&params.task_id)),
        Err(e) => Err(e),
        Ok(()) => render::complete(state, cx, EmptyResult::default()),
    }
}

/// `tasks/list` (2025-11-25): the caller's tasks, oldest first. Not offered without
/// authentication, where every caller would be the same anonymous owner.
pub(in crate::mcp) async fn list(
    state: &AppState,
    cx: &CallContext,
    params: &PaginatedParams,
) -> Result<Bytes, GatewayError> {
    if state.config.auth.mode == AuthMode::None {
        return Err(GatewayError::MethodNotFound { method: "tasks/list".to_owned() });
    }
    let cursor = params.cursor.as_deref().map(|c| ListCursor(c.to_owned()));
    if cursor.as_ref().is_some_and(|c| !valid_cursor(&c.0)) {
        return Err(GatewayError::invalid_params("invalid cursor"));
    }
    let page = state.store.list(cx.principal.key(), cursor.as_ref(), LIST_PAGE).await?;
    let result = ListTasksResult {
        tasks: page.tasks.iter().map(task_view::legacy).collect(),
        next_cursor: page.next.map(|c| c.0),
        result_type: None,
        meta: None,
    };
    render::complete(state, cx, result)
}

/// `tasks/result` (2025-11-25): waits, without polling, until the task is terminal, then
/// answers with its result (or its error). Waiters do not hold a request slot; their own
/// limits are `tasks.max_result_waiters` (503 past it) and, per principal,
/// `tasks.max_result_waiters_per_principal` (429).
pub(in crate::mcp) fn result(
    state: &AppState,
    cx: &CallContext,
    params: TaskIdParams,
) -> Result<Prepared, GatewayError> {
    wait(state, cx, params, Relation::Named)
}

/// Whether what a waiter sends names its task (`related-task` `_meta`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::mcp) enum Relation {
    /// `tasks/result`: the client asked about the task.
    Named,
    /// A call that became a task behind the client's back: its messages look like the call's own.
    Hidden,
}

/// Waits on a task, sending its input requests as they appear, then its result.
pub(in crate::mcp) fn wait(
    state: &AppState,
    cx: &CallContext,
    params: TaskIdParams,
    relation: Relation,
) -> Result<Prepared, GatewayError> {
    let waiter = state.result_waiters.acquire(cx.principal.caller_key())?;
    let state = state.clone();
    let cx = cx.clone();
    Ok(Box::new(move |notifier, cancel| -> Work {
        Box::pin(async move {
            let _waiter = waiter;
            let id = parse_id(&params.task_id)?;
            // Subscribe first, then read: a transition in between is not missed.
            let mut events = state.store.subscribe(&id).await?;
            // Input requests already sent on this stream (keys are never reused in a task).
            let mut sent: HashSet<String> = HashSet::new();
            loop {
                let record = find_quietly(&state, &cx, &id, &params.task_id, Read::WithOutcome).await?;
                if record.status.is_terminal() {
                    return task_view::legacy_result(&record, relation == Relation::Named).map(Bytes::from);
                }
                if record.status == TaskStatus::InputRequired {
                    if !notifier.is_streaming() {
                        return Err(GatewayError::NotSupported {
                            detail: format!(
                                "task {} is waiting for input; call tasks/result accepting text/event-stream to \
                                 receive its requests",
                                record.id
                            ),
                        });
                    }
                    for (key, stored) in &record.input_requests {
                        if sent.contains(key) {
                            continue;
                        }
                        let request = task_input::request(
                            &state,
                            &cx.principal,
                            &record,
                            key,
                            stored,
                            relation == Relation::Named,
                        )?;
                        let sent_ok = tokio::select! {
                            sent = notifier.send_message(request) => sent,
                            () = cancel.cancelled() => false,
                        };
                        if !sent_ok {
                            // The client left (or we are stopping); the task keeps waiting for
                            // another stream.
                            return Err(GatewayError::ShuttingDown);
                        }
                        sent.insert(key.clone());
                    }
                }
                // At its expiry the task disappears, and the re-read answers "not found".
                let recheck = record
                    .ttl_ms
                    .map_or(RECHECK_MAX, |ttl| {
                        let left = record.created_ms.saturating_add(ttl).saturating_sub(now_ms());
                        Duration::from_millis(left.saturating_add(50))
                    })
                    .clamp(RECHECK_MIN, RECHECK_MAX);
                tokio::select! {
                    event = events.next() => {
                        if event == TaskEvent::Resync {
                            tracing::debug!(task = %id, "re-reading task after missed events");
                        }
                    }
                    () = tokio::time::sleep(recheck) => {}
                    () = cancel.cancelled() => return Err(GatewayError::ShuttingDown),
                }
            }
        })
    }))
}

/// Modern task methods need the request to declare the extension (checked before any lookup).
pub(in crate::mcp) fn require_extension(cx: &CallContext) -> Result<(), GatewayError> {
    if cx.era == Era::Modern && !cx.capabilities.has_extension(TASKS_EXTENSION) {
        return Err(GatewayError::MissingCapability {
            message: "tasks require the io.modelcontextprotocol/tasks extension in clientCapabilities".to_owned(),
            required: Box::new(ClientCapabilities::only_extension(TASKS_EXTENSION)),
        });
    }
    Ok(())
}

fn legacy_task(state: &AppState, cx: &CallContext, record: &TaskRecord) -> Result<Bytes, GatewayError> {
    render::complete(state, cx, LegacyTaskResult { task: task_view::legacy(record), result_type: None, meta: None })
}

/// The caller's task, or "not found" (unknown, expired, malformed, or another's).
async fn find(state: &AppState, cx: &CallContext, raw: &str, read: Read) -> Result<TaskRecord, GatewayError> {
    let id = parse_id(raw)?;
    find_quietly(state, cx, &id, raw, read).await
}

/// [`find`] of an id already parsed (and recorded on the span), e.g. on every wake-up of a
/// waiting `tasks/result`.
async fn find_quietly(
    state: &AppState,
    cx: &CallContext,
    id: &TaskId,
    raw: &str,
    read: Read,
) -> Result<TaskRecord, GatewayError> {
    match state.store.get(id, read).await? {
        Some(record) if record.owner == cx.principal.key() => Ok(record),
        _ => Err(not_found(raw)),
    }
}

/// The id a request names; the request's span records it (so every span of a task's life
/// carries the task id).
fn parse_id(raw: &str) -> Result<TaskId, GatewayError> {
    let id = TaskId::parse(raw).ok_or_else(|| not_found(raw))?;
    tracing::Span::current().record("task", id.as_str());
    Ok(id)
}

fn not_found(raw: &str) -> GatewayError {
    GatewayError::TaskNotFound { task: clip(raw) }
}

fn valid_cursor(cursor: &str) -> bool {
    cursor.split_once(':').is_some_and(|(created, id)| created.parse::<u64>().is_ok() && TaskId::parse(id).is_some())
}
