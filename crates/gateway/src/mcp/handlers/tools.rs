//! `tools/call`.

use axum::http::HeaderMap;
use serde_json::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::tool::CallToolParams;

use super::invoke::{finish, tool_context};
use crate::catalog::{Notifier, ToolCall, check_header_params};
use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Work;
use crate::state::AppState;

/// Validates a tool call and returns the work that runs it.
pub(in crate::mcp) fn call_tool(
    state: &AppState,
    headers: &HeaderMap,
    cx: &CallContext,
    params: CallToolParams,
) -> Result<impl FnOnce(Notifier, tokio_util::sync::CancellationToken) -> Work + use<>, GatewayError> {
    let (tool, header_params) = state
        .catalog
        .tool(&params.name)
        .ok_or_else(|| GatewayError::invalid_params(format!("Unknown tool: {}", truncate(&params.name))))?;
    if cx.era == Era::Modern {
        check_header_params(headers, header_params, params.arguments.as_ref())?;
    }
    if params.request_state.is_some() {
        // This replica never mints requestState for a call without continuation state, so
        // whatever the client echoes was not minted by us.
        return Err(GatewayError::invalid_params("invalid requestState"));
    }
    let call = ToolCall {
        arguments: Value::Object(params.arguments.unwrap_or_default()),
        input_responses: params.input_responses.unwrap_or_default(),
        state: None,
    };
    let tool = tool.clone();
    let state = state.clone();
    let cx = cx.clone();
    Ok(move |notifier, cancel| -> Work {
        Box::pin(async move {
            let tcx = tool_context(&cx, notifier, cancel);
            finish(&state, &cx, tool.call(call, &tcx)).await
        })
    })
}

pub(super) fn truncate(s: &str) -> String {
    s.chars().take(100).collect()
}
