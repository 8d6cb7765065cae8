//! Rendering a handler's typed result for the request's era: modern results carry
//! `resultType` and the server info in `_meta`; legacy results carry neither. Input requests
//! are checked against the capabilities the request declared before they go out. A legacy
//! request asked only to open URLs (connecting an account) gets -32042 with them, as
//! 2025-11-25 defines, when it declared URL elicitation.

use bytes::Bytes;

use mcpgate_protocol::Era;
use mcpgate_protocol::elicitation::ElicitParams;
use mcpgate_protocol::input::{InputRequest, InputRequests, InputRequiredResult};
use mcpgate_protocol::meta::TASK_ID_KEY;
use mcpgate_protocol::result::{McpResult, ResultMeta, ResultType};
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::missing_capabilities;
use mcpgate_store::TaskId;
use serde_json::Value;

use crate::call_context::CallContext;
use crate::error::GatewayError;

/// Serializes a complete result for the request's era.
pub(super) fn complete<T: McpResult>(cx: &CallContext, mut result: T) -> Result<Bytes, GatewayError> {
    match cx.era {
        Era::Modern => {
            result.set_result_type(Some(ResultType::Complete));
            result.set_meta(Some(ResultMeta::server(cx.endpoint.server_info().clone())));
        }
        Era::Legacy => result.set_result_type(None),
    }
    to_bytes(&result)
}

/// [`complete`] for a 2026-07-28 call answered with the result of the task it created (see
/// `crate::tasks::CallAnswer`): the task's id goes in `_meta` under [`TASK_ID_KEY`].
pub(super) fn complete_of_task(
    cx: &CallContext,
    mut result: CallToolResult,
    task: &TaskId,
) -> Result<Bytes, GatewayError> {
    let mut meta = ResultMeta::server(cx.endpoint.server_info().clone());
    meta.other.insert(TASK_ID_KEY.to_owned(), Value::String(task.as_str().to_owned()));
    result.set_result_type(Some(ResultType::Complete));
    result.set_meta(Some(meta));
    to_bytes(&result)
}

/// Serializes an `InputRequiredResult` after checking the request may receive it.
pub(super) fn input_required(
    cx: &CallContext,
    requests: InputRequests,
    state_blob: Option<String>,
) -> Result<Bytes, GatewayError> {
    if cx.era == Era::Legacy {
        if cx.capabilities.elicitation_url()
            && let Some(asked) = url_elicitations(&requests)
        {
            return Err(asked);
        }
        return Err(GatewayError::NotSupported {
            detail: format!(
                "{} needs client input, which a 2025-11-25 session can give only within tasks, or on a tools/call \
                 that accepts text/event-stream",
                cx.method.as_str()
            ),
        });
    }
    if let Some(failure) = missing_capabilities(&cx.capabilities, &requests) {
        return Err(failure.into());
    }
    let result = InputRequiredResult {
        // A state-only result (a call handed to another replica) has no requests at all.
        input_requests: (!requests.is_empty()).then_some(requests),
        request_state: state_blob,
        result_type: Some(ResultType::InputRequired),
        meta: Some(ResultMeta::server(cx.endpoint.server_info().clone())),
    };
    to_bytes(&result)
}

/// `-32042` naming every request of `requests` when all are URL elicitations (their keys are
/// the `elicitationId`s); `None` when any asks something else.
pub(super) fn url_elicitations(requests: &InputRequests) -> Option<GatewayError> {
    let mut elicitations = Vec::new();
    let mut messages = Vec::new();
    for (key, request) in requests {
        let InputRequest::Elicitation { params: ElicitParams::Url(url) } = request else { return None };
        elicitations.push(serde_json::json!({
            "mode": "url",
            "elicitationId": key,
            "url": url.url,
            "message": url.message,
        }));
        messages.push(url.message.as_str());
    }
    (!elicitations.is_empty()).then(|| GatewayError::UrlElicitationRequired {
        message: messages.join(" "),
        elicitations: serde_json::Value::Array(elicitations),
    })
}

fn to_bytes<T: serde::Serialize>(value: &T) -> Result<Bytes, GatewayError> {
    serde_json::to_vec(value).map(Bytes::from).map_err(|e| GatewayError::internal_caused("serializing a result", e))
}
