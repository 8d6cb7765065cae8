//! Running one round of a tool, prompt or resource: the context it sees, the timeout, and
//! turning its outcome into a rendered result.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use mcpgate_protocol::result::McpResult;

use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Prepared;
use crate::mcp::render;
use crate::state::AppState;
use mcpgate_runtime::catalog::{BoxFuture, Outcome, ToolContext};

/// Wraps an invocation as work that runs inline or in a streaming task: builds the context,
/// applies the timeout, renders the outcome.
pub(super) fn prepare<T: McpResult + Send + 'static>(
    state: &AppState,
    cx: &CallContext,
    invoke: impl FnOnce(ToolContext) -> BoxFuture<'static, Outcome<T>> + Send + 'static,
) -> Prepared {
    let state = state.clone();
    let cx = cx.clone();
    Box::new(move |notifier, cancel| {
        Box::pin(async move {
            let tcx = ToolContext::new(
                cx.principal.clone(),
                cx.capabilities.clone(),
                cx.progress_token.clone(),
                cx.log_level,
                notifier,
                cancel,
            );
            finish(&state, &cx, invoke(tcx)).await
        })
    })
}

/// This replica mints no `requestState` for these calls yet, so whatever a client echoes was
/// not minted by us.
pub(super) fn reject_foreign_state(request_state: Option<&String>) -> Result<(), GatewayError> {
    match request_state {
        Some(_) => Err(GatewayError::invalid_params("invalid requestState")),
        None => Ok(()),
    }
}

async fn finish<T: McpResult>(
    state: &AppState,
    cx: &CallContext,
    invocation: impl Future<Output = Outcome<T>>,
) -> Result<Bytes, GatewayError> {
    let secs = state.config.server.tool_timeout_secs;
    let outcome = tokio::time::timeout(Duration::from_secs(secs), invocation)
        .await
        .map_err(|_| GatewayError::Timeout { secs })?;
    match outcome {
        Outcome::Complete(result) => render::complete(state, cx, result),
        Outcome::NeedInput { requests, state: None } => render::input_required(state, cx, requests, None),
        Outcome::NeedInput { state: Some(_), .. } => {
            Err(GatewayError::NotSupported { detail: "multi-round input with continuation state".to_owned() })
        }
        Outcome::Failed(failure) => Err(failure.into()),
    }
}
