//! Running one round of a tool, prompt or resource: context, timeout, and turning the outcome
//! into a rendered result.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::result::McpResult;

use crate::catalog::{Notifier, Outcome, ToolContext};
use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::render;
use crate::state::AppState;

/// The context handed to a tool for this request.
pub(super) fn tool_context(cx: &CallContext, notifier: Notifier, cancel: CancellationToken) -> ToolContext {
    ToolContext::new(
        cx.principal.clone(),
        cx.capabilities.clone(),
        cx.progress_token.clone(),
        cx.log_level,
        notifier,
        cancel,
    )
}

/// Awaits an invocation under the configured timeout and renders its outcome.
pub(super) async fn finish<T: McpResult>(
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
