//! `completion/complete` for prompt arguments and resource template variables.
//!
//! Invariant: a completion reaches only what its caller could use through this endpoint: a
//! prompt or template outside the endpoint's selection is unknown, and one its policy denies
//! is refused exactly as `prompts/get` or `resources/read` of it would be.

use bytes::Bytes;

use mcpgate_protocol::completion::{
    CompleteParams, CompleteResult, Completion, CompletionReference, MAX_COMPLETION_VALUES,
};

use crate::call_context::CallContext;
use crate::error::{GatewayError, clip};
use crate::mcp::render;
use crate::policy::{Arguments, Item, Use};
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
                .filter(|_| cx.endpoint.selects_prompt(name))
                .ok_or_else(|| GatewayError::invalid_params(format!("Unknown prompt: {}", clip(name))))?;
            let used = Use { target: Item::Prompt(name), upstream: prompt.upstream(), arguments: Arguments::None };
            cx.endpoint.check(&cx.endpoint.caller(&cx.principal), used)?;
            let context = params.context.as_ref().and_then(|c| c.arguments.clone()).unwrap_or_default();
            prompt.complete(&arg.name, &arg.value, &context)
        }
        CompletionReference::Resource { uri } => {
            let handler = catalog
                .resources()
                .iter()
                .find(|h| h.template().is_some_and(|t| t.uri_template == *uri))
                .filter(|_| cx.endpoint.selects_resource(uri))
                .ok_or_else(|| GatewayError::invalid_params(format!("Unknown resource template: {}", clip(uri))))?;
            let used = Use { target: Item::Resource(uri), upstream: handler.upstream(), arguments: Arguments::None };
            cx.endpoint.check(&cx.endpoint.caller(&cx.principal), used)?;
            handler.complete(&arg.name, &arg.value)
        }
    };
    let total = values.len();
    values.truncate(MAX_COMPLETION_VALUES);
    let completion = Completion { has_more: Some(total > values.len()), total: Some(total as u64), values };
    render::complete(cx, CompleteResult { completion, ..Default::default() })
}
