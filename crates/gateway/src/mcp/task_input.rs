//! A parked task's input requests for a 2025-11-25 client: sent as JSON-RPC requests on its
//! `tasks/result` stream, with ids that name the task and the input key, so the client's
//! response (a POST that may reach any replica) is routed to the task exactly like a
//! `tasks/update` answer.
//!
//! Threat model: the id travels through the client and comes back in a response anyone could
//! forge. It is therefore sealed (AES-256-GCM, purpose "task input"), bound to the principal
//! the request was sent to, and expires with the task; a response whose id does not open for
//! the caller is refused, and the store checks ownership again when it records the answer.
//! Ids that are not ours at all (no prefix) are responses to something else and are ignored.

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use mcpgate_protocol::jsonrpc::ResponseMessage;
use mcpgate_protocol::meta::RELATED_TASK_KEY;
use mcpgate_protocol::{JsonObject, RequestId};
use mcpgate_seal::{Binding, Purpose};
use mcpgate_store::{TaskId, TaskRecord};

use crate::mcp::answers;

use crate::error::{GatewayError, clip};
use crate::state::AppState;
use crate::time::now_ms;
use mcpgate_runtime::Principal;

/// Prefix of the ids of input requests sent on a task's stream.
const ID_PREFIX: &str = "mcpgate-input:";
/// How long an id stays valid when its task has no expiry.
const UNLIMITED_TASK_ID_TTL_MS: u64 = 24 * 3600 * 1000;
const NO_CONTEXT: [u8; 32] = [0; 32];

/// What an id carries.
#[derive(Debug, Serialize, Deserialize)]
struct InputId {
    #[serde(rename = "t")]
    task: String,
    #[serde(rename = "k")]
    key: String,
}

fn binding(principal: &Principal) -> Binding<'_> {
    Binding { purpose: Purpose::TaskInput, principal: principal.key(), method: "", context: &NO_CONTEXT }
}

/// The JSON-RPC request asking `principal` for the input under `key` of a parked task:
/// the stored request's method and params, with the related-task `_meta` when `related`.
pub(super) fn request(
    state: &AppState,
    principal: &Principal,
    record: &TaskRecord,
    key: &str,
    stored: &str,
    related: bool,
) -> Result<Bytes, GatewayError> {
    let internal = |what: &str| GatewayError::internal(format!("task input request: {what}"));
    let mut request: Map<String, Value> = serde_json::from_str(stored).map_err(|_| internal("unreadable"))?;
    let method = request.remove("method").ok_or_else(|| internal("no method"))?;
    let mut params = match request.remove("params") {
        Some(Value::Object(params)) => params,
        _ => JsonObject::new(),
    };
    // 2025-11-25 names each URL elicitation (a connect link): its key, unique in the task.
    if method == "elicitation/create" && params.get("mode").and_then(Value::as_str) == Some("url") {
        params.entry("elicitationId").or_insert_with(|| Value::String(key.to_owned()));
    }
    if related {
        let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(RELATED_TASK_KEY.to_owned(), serde_json::json!({ "taskId": record.id.as_str() }));
        }
    }
    let expires = match record.ttl_ms {
        Some(ttl) => record.created_ms.saturating_add(ttl),
        None => now_ms().saturating_add(UNLIMITED_TASK_ID_TTL_MS),
    };
    let payload = serde_json::to_vec(&InputId { task: record.id.to_string(), key: key.to_owned() })
        .map_err(|e| GatewayError::internal_caused("task input request: id encoding", e))?;
    let sealed = state
        .sealer
        .seal(&binding(principal), expires, &payload)
        .map_err(|e| GatewayError::internal_caused("sealing an input request id", e))?;
    let message = serde_json::json!({
        "jsonrpc": "2.0",
        "id": format!("{ID_PREFIX}{sealed}"),
        "method": method,
        "params": params,
    });
    serde_json::to_vec(&message)
        .map(Bytes::from)
        .map_err(|e| GatewayError::internal_caused("task input request: encoding", e))
}

/// Routes a client's response to an input request to its task. Responses to anything else
/// are ignored; an error response leaves the task waiting (the client may answer again).
pub(crate) async fn answer(
    state: &AppState,
    principal: &Principal,
    response: &ResponseMessage<'_>,
) -> Result<(), GatewayError> {
    let RequestId::String(id) = &response.id else { return Ok(()) };
    let Some(sealed) = id.strip_prefix(ID_PREFIX) else { return Ok(()) };
    let payload = state.sealer.open(&binding(principal), now_ms(), sealed).map_err(|e| {
        let reason = e.open_failure().map_or("unusable", |r| {
            state.metrics.seal_failure(r);
            r.as_str()
        });
        tracing::info!(reason, "input request id rejected");
        GatewayError::invalid_params("unknown or expired input request id")
    })?;
    let input: InputId = serde_json::from_slice(&payload)
        .map_err(|_| GatewayError::invalid_params("unknown or expired input request id"))?;
    let task = TaskId::parse(&input.task)
        .ok_or_else(|| GatewayError::invalid_params("unknown or expired input request id"))?;
    tracing::Span::current().record("task", task.as_str());
    let Some(result) = response.result else {
        let message = response.error.as_ref().map(|e| clip(&e.message)).unwrap_or_default();
        // The span names the task (recorded just above).
        tracing::info!(key = %clip(&input.key), %message, "client answered an input request with an error");
        return Ok(());
    };
    let answers = answers::check(state, [(input.key.clone(), result.get().to_owned())])?;
    answers::record(state, &task, principal.key(), &answers, |key| {
        format!("the response to input request {}", clip(key))
    })
    .await
}
