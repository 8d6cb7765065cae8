//! `tools/call`.

use axum::http::HeaderMap;
use serde_json::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::tool::CallToolParams;

use super::invoke::{prepare, reject_foreign_state};
use crate::error::{GatewayError, clip};
use crate::http::headers::check_params;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Prepared;
use crate::state::AppState;
use mcpgate_runtime::catalog::ToolCall;

/// Validates a tool call (known tool, mirrored `Mcp-Param-*` headers) and prepares it.
pub(in crate::mcp) fn call_tool(
    state: &AppState,
    headers: &HeaderMap,
    cx: &CallContext,
    params: CallToolParams,
) -> Result<Prepared, GatewayError> {
    let (tool, header_params) = state
        .catalog
        .tool(&params.name)
        .ok_or_else(|| GatewayError::invalid_params(format!("Unknown tool: {}", clip(&params.name))))?;
    if cx.era == Era::Modern {
        check_params(headers, header_params, params.arguments.as_ref())?;
    }
    reject_foreign_state(params.request_state.as_ref())?;
    let call = ToolCall {
        arguments: Value::Object(params.arguments.unwrap_or_default()),
        input_responses: params.input_responses.unwrap_or_default(),
        state: None,
    };
    let tool = tool.clone();
    Ok(prepare(state, cx, move |tcx| Box::pin(async move { tool.call(call, &tcx).await })))
}
