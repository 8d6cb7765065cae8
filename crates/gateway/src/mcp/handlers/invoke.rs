//! Running one round of a tool, prompt or resource: the context it sees, the timeout, and
//! turning its outcome into a rendered result (asking for input with a sealed requestState
//! when the outcome is a request for more input).

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use mcpgate_protocol::result::McpResult;

use mcpgate_protocol::Era;
use mcpgate_protocol::input::InputRequests;
use mcpgate_runtime::catalog::missing_capabilities;

use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::mcp::render;
use crate::mcp::request_state::Round;
use crate::mcp::work::Prepared;
use crate::state::AppState;
use mcpgate_protocol::method::Method;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::{BoxFuture, Failure, HandOff, Notifier, Outcome, Tool, ToolCall, ToolContext};
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Wraps an invocation as work that runs inline or in a streaming task: builds the context,
/// applies the timeout, renders the outcome.
pub(super) fn prepare<T: McpResult + Send + 'static>(
    state: &AppState,
    cx: &CallContext,
    round: Round,
    invoke: impl FnOnce(ToolContext) -> BoxFuture<'static, Outcome<T>> + Send + 'static,
) -> Prepared {
    let state = state.clone();
    let cx = cx.clone();
    Box::new(move |notifier, cancel| {
        Box::pin(async move {
            let tcx = tool_context(&state, &cx, notifier, cancel);
            finish(&state, &cx, &round, invoke(tcx)).await
        })
    })
}

/// A 2026-07-28 synchronous tool call: like [`prepare`], and when the replica sheds load
/// (`http.shed_at_requests`), a call whose tool checkpoints while the replica is that busy is
/// answered with its checkpoint sealed as `requestState` and no input requests, so the
/// client's retry continues from the checkpoint on another replica.
pub(super) fn prepare_call(
    state: &AppState,
    cx: &CallContext,
    round: Round,
    tool: Arc<dyn Tool>,
    call: ToolCall,
) -> Prepared {
    let shed_at = state.config.http.shed_at_requests;
    if shed_at == 0 {
        return prepare(state, cx, round, move |tcx| Box::pin(async move { tool.call(call, &tcx).await }));
    }
    let state = state.clone();
    let cx = cx.clone();
    Box::new(move |notifier, cancel| {
        Box::pin(async move {
            let metrics = state.metrics.clone();
            let hand_off = HandOff::new(move || metrics.in_flight() >= shed_at);
            let tcx = tool_context(&state, &cx, notifier, cancel).with_hand_off(hand_off.clone());
            tokio::select! {
                biased;
                outcome = finish(&state, &cx, &round, tool.call(call, &tcx)) => outcome,
                checkpoint = hand_off.requested() => {
                    state.metrics.handed_off();
                    tracing::debug!("call handed off at a checkpoint");
                    let token = round.next(&state, &cx, &InputRequests::new(), Some(checkpoint))?;
                    render::input_required(&cx, InputRequests::new(), Some(token))
                }
            }
        })
    })
}

/// What an invocation sees of the request it serves.
pub(super) fn tool_context(
    state: &AppState,
    cx: &CallContext,
    notifier: Notifier,
    cancel: CancellationToken,
) -> ToolContext {
    ToolContext::new(
        cx.principal.clone(),
        cx.capabilities.clone(),
        cx.progress_token.clone(),
        cx.log_level,
        notifier,
        cancel,
    )
    .with_changes(state.store.clone())
    .with_server(cx.endpoint.server())
}

pub(super) async fn finish<T: McpResult>(
    state: &AppState,
    cx: &CallContext,
    round: &Round,
    invocation: impl Future<Output = Outcome<T>>,
) -> Result<Bytes, GatewayError> {
    let secs = state.config.server.tool_timeout_secs;
    let outcome = tokio::time::timeout(Duration::from_secs(secs), invocation)
        .await
        .map_err(|_| GatewayError::Timeout { secs })?;
    match outcome {
        Outcome::Complete(result) => render::complete(cx, result),
        Outcome::NeedInput { requests, state: continuation } => ask(state, cx, round, requests, continuation),
        // Arguments a tool refused are its result, which the model reads (SEP-1303); a
        // prompt's are -32602.
        Outcome::Failed(Failure::InvalidArguments(message)) if cx.method == Method::ToolsCall => {
            render::complete(cx, CallToolResult::error(message))
        }
        Outcome::Failed(failure) => Err(failure.into()),
    }
}

/// An `InputRequiredResult` asking `requests`, with the sealed state of the next round.
pub(super) fn ask(
    state: &AppState,
    cx: &CallContext,
    round: &Round,
    requests: InputRequests,
    continuation: Option<serde_json::Value>,
) -> Result<Bytes, GatewayError> {
    if cx.era == Era::Legacy || requests.is_empty() {
        // Legacy sessions cannot answer outside tasks; render says so. No requests is a bug.
        if requests.is_empty() {
            return Err(GatewayError::internal(format!("{} asked for input but named none", cx.method.as_str())));
        }
        return render::input_required(cx, requests, None);
    }
    // Asking for what the client cannot answer is -32021, before any sealing work.
    if let Some(failure) = missing_capabilities(&cx.capabilities, &requests) {
        return Err(failure.into());
    }
    let token = round.next(state, cx, &requests, continuation)?;
    render::input_required(cx, requests, Some(token))
}
