//! Task methods of both eras, on one stored record: creating a task from `tools/call`,
//! `tasks/get`, `tasks/cancel`, and `tasks/update` (extension), `tasks/result` and
//! `tasks/list` (2025-11-25).
//!
//! Invariants: a task is found only by its owner (anyone else gets "not found", never
//! "forbidden"), and through a virtual server only if it was created through that server
//! (the root reads every one of the owner's; another server's task is "not found" too);
//! `CreateTaskResult` is sent only after the store made the task durable; the
//! same call retried within the idempotency window returns the same task; tasks are created,
//! found and cancelled through the task service (`crate::tasks`), so admitted there (quotas,
//! task rate limits, worker slots) and found by their owner only; a legacy `tasks/result`
//! waits on the task's events, not by polling, within its caller's share of the replica's
//! waiters.

use std::collections::HashSet;
use std::time::Duration;

use bytes::Bytes;

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::{ClientCapabilities, TASKS_EXTENSION};
use mcpgate_protocol::pagination::PaginatedParams;
use mcpgate_protocol::result::{EmptyResult, ResultMeta, ResultType};
use mcpgate_protocol::task::{
    CreateTaskResult, LegacyCreateTaskResult, LegacyTaskResult, ListTasksResult, TaskIdParams, TaskStatus,
};
use mcpgate_store::{Cancelled, EventBus as _, ListCursor, Read, TaskEvent, TaskId, TaskRecord, TaskStore as _};

use crate::call_context::CallContext;
use crate::config::AuthMode;
use crate::error::{GatewayError, clip};
use crate::limits::Charge;
use crate::mcp::render;
use crate::mcp::request_state::MAX_ANSWERS;
use crate::mcp::work::{Prepared, Work};
use crate::mcp::{answers, task_input, task_view};
use crate::state::AppState;
use crate::tasks::{CallAnswer, TaskPlan};
use crate::time::now_ms;

/// Tasks per `tasks/list` page.
const LIST_PAGE: usize = 50;

/// A `tasks/result` waiter re-reads its task at least this often, should an event be lost
/// (pub/sub delivers at most once), and at most this often when its clock and Redis's
/// disagree about the expiry.
const RECHECK_MAX: Duration = Duration::from_secs(30);
const RECHECK_MIN: Duration = Duration::from_secs(1);

/// Creates the task and answers with `CreateTaskResult` in the request's era, or with the
/// task's outcome when it ended at once (2026-07-28; see `crate::tasks::CallAnswer`).
pub(in crate::mcp) async fn create(state: &AppState, cx: &CallContext, plan: TaskPlan) -> Result<Bytes, GatewayError> {
    match state.tasks.create_for_call(cx, plan).await? {
        CallAnswer::Task(record) => render_created(cx, &record),
        CallAnswer::Result { task, result } => render::complete_of_task(cx, *result, &task),
    }
}

/// `CreateTaskResult` for a task just created, in the request's era.
pub(in crate::mcp) fn render_created(cx: &CallContext, record: &TaskRecord) -> Result<Bytes, GatewayError> {
    tracing::Span::current().record("task", record.id.as_str());
    tracing::debug!("task created");
    match cx.era {
        Era::Modern => {
            let result = CreateTaskResult {
                task: task_view::modern(record),
                result_type: Some(ResultType::Task),
                meta: Some(ResultMeta::server(cx.endpoint.server_info().clone())),
            };
            serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal_caused("task", e))
        }
        Era::Legacy => {
            let result = LegacyCreateTaskResult { task: task_view::legacy(record), result_type: None, meta: None };
            serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal_caused("task", e))
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
        tokio::join!(find(state, cx, &params.task_id, read), state.limits.admit(&cx.principal, Charge::Poll));
    let (mut record, advice) = (record?, advice?);
    if !advice.is_zero() && !record.status.is_terminal() {
        let advice_ms = u64::try_from(advice.as_millis()).unwrap_or(u64::MAX).saturating_add(1);
        record.poll_interval_ms = record.poll_interval_ms.max(advice_ms);
    }
    match cx.era {
        Era::Modern => render::complete(cx, task_view::detailed(&record)?),
        Era::Legacy => legacy_task(cx, &record),
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
    check_endpoint(state, cx, &id, &params.task_id).await?;
    match (state.tasks.cancel(&id, cx.principal.key()).await?, cx.era) {
        (Cancelled::NotFound, _) => Err(not_found(&params.task_id)),
        (_, Era::Modern) => render::complete(cx, EmptyResult::default()),
        (Cancelled::Now(record), Era::Legacy) => legacy_task(cx, &record),
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
    check_endpoint(state, cx, &id, &params.task_id).await?;
    match answers::record(state, &id, cx.principal.key(), &answers, |key| format!("inputResponses.{}", clip(key))).await
    {
        Err(GatewayError::TaskNotFound { .. }) => Err(not_found(&params.task_id)),
        Err(e) => Err(e),
        Ok(()) => render::complete(cx, EmptyResult::default()),
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
    // Through a virtual server, only its tasks (a page may then hold fewer than it could).
    let result = ListTasksResult {
        tasks: page.tasks.iter().filter(|t| cx.endpoint.sees_task(t)).map(task_view::legacy).collect(),
        next_cursor: page.next.map(|c| c.0),
        result_type: None,
        meta: None,
    };
    render::complete(cx, result)
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

fn legacy_task(cx: &CallContext, record: &TaskRecord) -> Result<Bytes, GatewayError> {
    render::complete(cx, LegacyTaskResult { task: task_view::legacy(record), result_type: None, meta: None })
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
    let found = state.tasks.find(id, cx.principal.key(), read).await?;
    found.filter(|record| cx.endpoint.sees_task(record)).ok_or_else(|| not_found(raw))
}

/// Through a virtual server, that the caller's task `id` was created through it before it is
/// changed (at the root every task of the owner's is, and nothing is read here).
async fn check_endpoint(state: &AppState, cx: &CallContext, id: &TaskId, raw: &str) -> Result<(), GatewayError> {
    if cx.endpoint.server().is_some() {
        find_quietly(state, cx, id, raw, Read::Control).await?;
    }
    Ok(())
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
