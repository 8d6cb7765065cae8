//! `prompts/get`: a prompt of this gateway, or of an upstream (then counted against the
//! upstream's rate limits, like a call of its tools).

use serde_json::{Map, Value};

use mcpgate_protocol::prompt::GetPromptParams;

use super::invoke::prepare;
use crate::call_context::CallContext;
use crate::error::{GatewayError, clip};
use crate::limits::Charge;
use crate::mcp::request_state::{Mode, Round, Target};
use crate::mcp::work::Prepared;
use crate::policy::{Arguments, Item, Use};
use crate::state::AppState;

/// Validates a prompt request (known prompt, required arguments present, the echoed
/// requestState) and prepares it.
pub(in crate::mcp) async fn get_prompt(
    state: &AppState,
    cx: &CallContext,
    params: GetPromptParams,
) -> Result<Prepared, GatewayError> {
    let prompt = state
        .catalog
        .load()
        .prompt(&params.name)
        .filter(|_| cx.endpoint.selects_prompt(&params.name))
        .ok_or_else(|| GatewayError::invalid_params(format!("Unknown prompt: {}", clip(&params.name))))?
        .clone();
    let used = Use {
        target: Item::Prompt(&params.name),
        upstream: prompt.upstream(),
        arguments: params.arguments.as_ref().map_or(Arguments::None, Arguments::Strings),
    };
    cx.endpoint.check(&cx.endpoint.caller(&cx.principal), used)?;
    let arguments = params.arguments.unwrap_or_default();
    for arg in prompt.descriptor().arguments.iter().flatten() {
        if arg.required == Some(true) && !arguments.contains_key(&arg.name) {
            return Err(GatewayError::invalid_params(format!("missing required argument: {}", arg.name)));
        }
    }
    // A prompt of an upstream is a request to it: charged to the upstream's limit, once the
    // request is known to be valid and before anything is stored or sent.
    if let Some(upstream) = prompt.upstream() {
        state.limits.admit(&cx.principal, Charge::Upstream { upstream }).await?;
    }
    let arguments = Value::Object(arguments.into_iter().map(|(k, v)| (k, Value::String(v))).collect::<Map<_, _>>());
    let target = Target::new(cx, &params.name, &arguments, Mode::Now)?;
    let mut round = Round::resume(state, cx, target, params.request_state.as_deref(), params.input_responses.as_ref())?;
    round.commit(state).await?;
    let call = round.tool_call(arguments);
    Ok(prepare(state, cx, round, move |tcx| Box::pin(async move { prompt.get(call, &tcx).await })))
}
