//! Rendering a handler's typed result for the request's era: modern results carry
//! `resultType` and the server info in `_meta`; legacy results carry neither. Input requests
//! are checked against the capabilities the request declared before they go out.

use bytes::Bytes;
use serde_json::{Map, Value};

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::elicitation::ElicitParams;
use mcpgate_protocol::input::{InputRequest, InputRequests, InputRequiredResult};
use mcpgate_protocol::result::{McpResult, ResultMeta, ResultType};

use super::context::CallContext;
use crate::error::GatewayError;
use crate::state::AppState;

/// Serializes a complete result for the request's era.
pub(super) fn complete<T: McpResult>(state: &AppState, cx: &CallContext, mut result: T) -> Result<Bytes, GatewayError> {
    match cx.era {
        Era::Modern => {
            result.set_result_type(Some(ResultType::Complete));
            result.set_meta(Some(ResultMeta::server(state.server_info.clone())));
        }
        Era::Legacy => result.set_result_type(None),
    }
    to_bytes(&result)
}

/// Serializes an `InputRequiredResult` after checking the request may receive it.
pub(super) fn input_required(
    state: &AppState,
    cx: &CallContext,
    requests: InputRequests,
    state_blob: Option<String>,
) -> Result<Bytes, GatewayError> {
    if cx.era == Era::Legacy {
        return Err(GatewayError::NotSupported {
            detail: format!(
                "{} needs client input, which 2025-11-25 sessions can provide only within tasks",
                cx.method.as_str()
            ),
        });
    }
    require_capabilities(&cx.capabilities, &requests)?;
    let result = InputRequiredResult {
        input_requests: Some(requests),
        request_state: state_blob,
        result_type: Some(ResultType::InputRequired),
        meta: Some(ResultMeta::server(state.server_info.clone())),
    };
    to_bytes(&result)
}

/// `-32021` unless every input request is one the client declared it can answer.
pub(super) fn require_capabilities(caps: &ClientCapabilities, requests: &InputRequests) -> Result<(), GatewayError> {
    let mut required = Map::new();
    let mut add = |key: &str, sub: Option<&str>| {
        let entry = required.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new()));
        if let (Some(sub), Value::Object(map)) = (sub, entry) {
            map.insert(sub.to_owned(), Value::Object(Map::new()));
        }
    };
    for request in requests.values() {
        match request {
            InputRequest::Elicitation { params: ElicitParams::Form(_) } if !caps.elicitation_form() => {
                add("elicitation", caps.elicitation.is_some().then_some("form"));
            }
            InputRequest::Elicitation { params: ElicitParams::Url(_) } if !caps.elicitation_url() => {
                add("elicitation", Some("url"));
            }
            InputRequest::Sampling { params } => {
                if caps.sampling.is_none() {
                    add("sampling", None);
                }
                let wants_tools = params.tools.as_ref().is_some_and(|t| !t.is_empty());
                if wants_tools && caps.sampling.as_ref().is_none_or(|s| s.tools.is_none()) {
                    add("sampling", Some("tools"));
                }
            }
            InputRequest::ListRoots { .. } if caps.roots.is_none() => add("roots", None),
            _ => {}
        }
    }
    if required.is_empty() {
        return Ok(());
    }
    let names: Vec<&str> = required.keys().map(String::as_str).collect();
    let message = format!("This request needs client capabilities it did not declare: {}", names.join(", "));
    let required: ClientCapabilities = serde_json::from_value(Value::Object(required))
        .map_err(|e| GatewayError::internal(format!("capability set: {e}")))?;
    Err(GatewayError::MissingCapability { message, required: Box::new(required) })
}

fn to_bytes<T: serde::Serialize>(value: &T) -> Result<Bytes, GatewayError> {
    serde_json::to_vec(value).map(Bytes::from).map_err(|e| GatewayError::internal(format!("serializing a result: {e}")))
}
