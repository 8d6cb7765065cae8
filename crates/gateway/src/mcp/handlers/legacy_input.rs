//! A 2025-11-25 session's plain `tools/call` whose tool asks for input (a built-in tool's
//! round, or an upstream's 2026-07-28 `input_required`): 2025-11-25 asks the client with
//! server→client requests on the call's SSE stream, and the client's responses are POSTs that
//! may reach any replica. So the call becomes a task for its remaining life, created already
//! leased to this replica: its run asks in place (`ToolContext::ask_in_place`, keeping the
//! lease) and runs the tool's next round with the answers, while this request waits on the
//! task exactly like `tasks/result` does on the same stream (sending the task's input requests
//! as they appear, then the result). Answers reach the task through the store from whichever
//! replica they land on.
//!
//! Invariants: a call that needs no input answers as before (JSON, no task); a call that does
//! becomes a task only when admitted like any task (`crate::tasks`: the caller's quotas and
//! task rate limits, a free worker slot here, held while the task waits), else it fails with
//! the refusal (429 or 503) and nothing is created; each question waits at most `HOLD_LIMIT`,
//! then the call fails saying so; a client that leaves cancels the task; the client never
//! needs the task id (it sees it only as related-task metadata).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::input::{InputRequests, InputResponses};
use mcpgate_protocol::task::TaskIdParams;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::{Checkpoints, Failure, Outcome, Tool, ToolCall, ToolContext};
use mcpgate_runtime::worker::Adopted;
use mcpgate_store::TaskId;
use serde_json::Value;

use super::invoke::{finish, tool_context};
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::mcp::request_state::Round;
use crate::mcp::work::Prepared;
use crate::state::AppState;
use crate::tasks::{Adoption, TaskPlan, TtlRequest};

/// How long one question may wait for the client's answer.
const HOLD_LIMIT: Duration = Duration::from_secs(300);

/// A legacy call of `tool` that turns into a task if (and when) it asks for input.
pub(super) fn prepare(
    state: &AppState,
    cx: &CallContext,
    round: Round,
    tool: Arc<dyn Tool>,
    name: String,
    call: ToolCall,
) -> Prepared {
    let state = state.clone();
    let cx = cx.clone();
    Box::new(move |notifier, cancel: CancellationToken| {
        Box::pin(async move {
            // Kept for the later rounds only when there can be any (a stream to ask on).
            let arguments = notifier.is_streaming().then(|| call.arguments.clone());
            let answers = notifier.is_streaming().then(|| call.input_responses.clone());
            let tcx = tool_context(&state, &cx, notifier.clone(), cancel.clone());
            let outcome = tool.call(call, &tcx).await;
            let (Some(arguments), Some(answers), Outcome::NeedInput { requests, state: continuation }) =
                (arguments, answers, &outcome)
            else {
                return finish(&state, &cx, &round, std::future::ready(outcome)).await;
            };
            // Only URLs to open (connecting an account): -32042 says so at once, and the
            // client calls again once its user is done; no task needed.
            if cx.capabilities.elicitation_url() && crate::mcp::render::url_elicitations(requests).is_some() {
                return finish(&state, &cx, &round, std::future::ready(outcome)).await;
            }
            let asked = Asked { requests: requests.clone(), continuation: continuation.clone(), answers };
            let task = become_task(&state, &cx, tool, name, arguments, asked).await?;
            // Unless the wait below ends with the task's outcome, the task is cancelled: the
            // client left (this future is dropped) or cannot be waited for, and nobody would
            // answer its questions or read its result.
            let mut orphan =
                CancelOnDrop { state: state.clone(), task: task.clone(), owner: cx.principal.key().to_owned() };
            let params = TaskIdParams { task_id: task.to_string(), meta: None };
            let waiter = super::task_methods::wait(&state, &cx, params, super::task_methods::Relation::Hidden)?;
            let answered = waiter(notifier, cancel.clone()).await;
            if !cancel.is_cancelled() && !matches!(answered, Err(GatewayError::ShuttingDown)) {
                orphan.disarm();
            }
            answered
        })
    })
}

/// Cancels a call's task when dropped armed (see `prepare`).
struct CancelOnDrop {
    state: AppState,
    task: TaskId,
    owner: String,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.owner.clear();
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.owner.is_empty() {
            return;
        }
        let (state, task, owner) = (self.state.clone(), self.task.clone(), std::mem::take(&mut self.owner));
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        runtime.spawn(async move {
            if let Err(e) = state.tasks.cancel(&task, &owner).await {
                tracing::warn!(task = %task, error = &e as &dyn std::error::Error, "the task of a call whose client left could not be cancelled");
            }
        });
    }
}

/// What the first round asked.
struct Asked {
    requests: InputRequests,
    continuation: Option<Value>,
    /// The answers the call came with.
    answers: InputResponses,
}

/// Creates the task (leased here) and hands its remaining rounds to this replica's workers;
/// returns its id.
async fn become_task(
    state: &AppState,
    cx: &CallContext,
    tool: Arc<dyn Tool>,
    name: String,
    arguments: Value,
    asked: Asked,
) -> Result<TaskId, GatewayError> {
    let plan = TaskPlan {
        tool: name,
        arguments: arguments.clone(),
        ttl: TtlRequest::Default,
        answers: asked.answers.clone(),
        state: asked.continuation.clone(),
        keeps_credential: state.tasks.keeps_credential(tool.descriptor()),
    };
    let sent_at = tokio::time::Instant::now();
    let upstream = tool.descriptor().upstream.clone();
    let Adoption { record, lease, job, slot } = state.tasks.adopt(cx, upstream.as_deref(), plan).await?;
    tracing::info!(task = %record.id, "a 2025-11-25 call asking for input became a task");
    let (status_tx, status) = watch::channel(None);
    let run_cancel = CancellationToken::new();
    let checkpointed = Arc::new(AtomicBool::new(false));
    let checkpoints = Checkpoints::new(state.store.clone(), lease.clone(), checkpointed.clone());
    let rcx = ToolContext::for_task(cx.principal.clone(), cx.capabilities.clone(), status_tx, run_cancel.clone())
        .with_changes(state.store.clone())
        .with_server(cx.endpoint.server())
        .with_checkpoints(checkpoints);
    let retry_safe = tool.descriptor().retry_safe;
    let rounds = async move {
        let Asked { mut requests, mut continuation, mut answers } = asked;
        loop {
            // Keys name requests for the task's whole life: the client may hold an answer to
            // an earlier one of the same name.
            if let Some(key) = requests.keys().find(|k| answers.contains_key(*k)) {
                return Outcome::<CallToolResult>::Failed(Failure::Internal(format!(
                    "asked again for input key {key:?}"
                )));
            }
            match rcx.ask_in_place(&requests, Some(continuation.as_ref()), HOLD_LIMIT).await {
                Ok(given) => answers.extend(given),
                Err(failure) => return Outcome::<CallToolResult>::Failed(failure),
            }
            let call = ToolCall { arguments: arguments.clone(), input_responses: answers.clone(), state: continuation };
            match tool.call(call, &rcx).await {
                Outcome::NeedInput { requests: more, state: next } => {
                    requests = more;
                    continuation = next;
                }
                other => return other,
            }
        }
    };
    let id = record.id.clone();
    let adopted = Adopted { job, lease, task: record, sent_at, status, cancel: run_cancel, retry_safe, checkpointed };
    state.tasks.workers().adopt(slot, adopted, rounds);
    Ok(id)
}
