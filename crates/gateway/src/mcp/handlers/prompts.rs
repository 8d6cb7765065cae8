//! `prompts/get`.

use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::prompt::GetPromptParams;

use super::invoke::{finish, tool_context};
use super::tools::truncate;
use crate::catalog::{Notifier, ToolCall};
use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Work;
use crate::state::AppState;

/// Validates a prompt request (known prompt, required arguments present) and returns the work.
pub(in crate::mcp) fn get_prompt(
    state: &AppState,
    cx: &CallContext,
    params: GetPromptParams,
) -> Result<impl FnOnce(Notifier, CancellationToken) -> Work + use<>, GatewayError> {
    let prompt = state
        .catalog
        .prompt(&params.name)
        .ok_or_else(|| GatewayError::invalid_params(format!("Unknown prompt: {}", truncate(&params.name))))?
        .clone();
    let arguments = params.arguments.unwrap_or_default();
    for arg in prompt.descriptor().arguments.iter().flatten() {
        if arg.required == Some(true) && !arguments.contains_key(&arg.name) {
            return Err(GatewayError::invalid_params(format!("missing required argument: {}", arg.name)));
        }
    }
    if params.request_state.is_some() {
        return Err(GatewayError::invalid_params("invalid requestState"));
    }
    let call = ToolCall {
        arguments: Value::Object(arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>()),
        input_responses: params.input_responses.unwrap_or_default(),
        state: None,
    };
    let state = state.clone();
    let cx = cx.clone();
    Ok(move |notifier, cancel| -> Work {
        Box::pin(async move {
            let tcx = tool_context(&cx, notifier, cancel);
            finish(&state, &cx, prompt.get(call, &tcx)).await
        })
    })
}
