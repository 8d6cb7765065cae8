//! `prompts/get`.

use serde_json::{Map, Value};

use mcpgate_protocol::prompt::GetPromptParams;

use super::invoke::{prepare, reject_foreign_state};
use crate::error::{GatewayError, clip};
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Prepared;
use crate::state::AppState;
use mcpgate_protocol::input::decode_input_responses;
use mcpgate_runtime::catalog::ToolCall;

/// Validates a prompt request (known prompt, required arguments present) and prepares it.
pub(in crate::mcp) fn get_prompt(
    state: &AppState,
    cx: &CallContext,
    params: GetPromptParams,
) -> Result<Prepared, GatewayError> {
    let prompt = state
        .catalog
        .prompt(&params.name)
        .ok_or_else(|| GatewayError::invalid_params(format!("Unknown prompt: {}", clip(&params.name))))?
        .clone();
    let arguments = params.arguments.unwrap_or_default();
    for arg in prompt.descriptor().arguments.iter().flatten() {
        if arg.required == Some(true) && !arguments.contains_key(&arg.name) {
            return Err(GatewayError::invalid_params(format!("missing required argument: {}", arg.name)));
        }
    }
    reject_foreign_state(params.request_state.as_ref())?;
    let call = ToolCall {
        arguments: Value::Object(arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>()),
        input_responses: params.input_responses.as_ref().map(|raw| decode_input_responses(raw).0).unwrap_or_default(),
        state: None,
    };
    Ok(prepare(state, cx, move |tcx| Box::pin(async move { prompt.get(call, &tcx).await })))
}
