//! `completion/complete` for prompt arguments and resource template variables.

use bytes::Bytes;

use mcpgate_protocol::completion::{
    CompleteParams, CompleteResult, Completion, CompletionReference, MAX_COMPLETION_VALUES,
};

use crate::call_context::CallContext;
use crate::error::{GatewayError, clip};
use crate::mcp::render;
use crate::state::AppState;

/// Completes one argument.
pub(in crate::mcp) fn complete(
    state: &AppState,
    cx: &CallContext,
    params: &CompleteParams,
) -> Result<Bytes, GatewayError> {
    let arg = &params.argument;
    let catalog = state.catalog.load();
    let mut values = match &params.reference {
        CompletionReference::Prompt { name, .. } => {
            let prompt = catalog
                .prompt(name)
                .ok_or_else(|| GatewayError::invalid_params(format!("Unknown prompt: {}", clip(name))))?;
            let context = params.context.as_ref().and_then(|c| c.arguments.clone()).unwrap_or_default();
            prompt.complete(&arg.name, &arg.value, &context)
        }
        CompletionReference::Resource { uri } => {
            let handler = catalog
                .resources()
                .iter()
                .find(|h| h.template().is_some_and(|t| t.uri_template == *uri))
                .ok_or_else(|| GatewayError::invalid_params(format!("Unknown resource template: {}", clip(uri))))?;
            handler.complete(&arg.name, &arg.value)
        }
    };
    let total = values.len();
    values.truncate(MAX_COMPLETION_VALUES);
    let completion = Completion { has_more: Some(total > values.len()), total: Some(total as u64), values };
    render::complete(state, cx, CompleteResult { completion, ..Default::default() })
}
