//! The client half of JSON-RPC as the gateway speaks it to upstreams: building requests
//! (with the per-request `_meta` of 2026-07-28, or plain for a session of an earlier
//! version), reading what comes back (responses by id, progress, server requests), and the
//! handshake messages of both eras.
//!
//! Invariant: results are kept as raw JSON (`RawValue`) here; only the envelope is parsed.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use mcpgate_protocol::meta::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY, PROTOCOL_VERSION_KEY};

use crate::error::{UpstreamError, cause};

/// The modern protocol version.
pub(crate) const MODERN_VERSION: &str = "2026-07-28";

/// The protocol an upstream speaks, as negotiated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Negotiated {
    /// Stateless 2026-07-28: `_meta` on every request.
    Modern,
    /// A session of this (earlier) version.
    Legacy {
        /// The version the server chose.
        version: String,
    },
}

impl Negotiated {
    /// The `MCP-Protocol-Version` header value.
    pub(crate) fn version(&self) -> &str {
        match self {
            Self::Modern => MODERN_VERSION,
            Self::Legacy { version } => version,
        }
    }
}

/// The gateway's own client info, sent to upstreams.
fn client_info() -> Value {
    json!({ "name": "mcpgate", "title": "mcpgate gateway", "version": env!("CARGO_PKG_VERSION") })
}

/// The client capabilities the gateway declares on its own requests (`server/discover` and
/// the list reads): every kind of input it can relay to its clients. The catalog it reads
/// serves all of them, so it is read as a client that can answer; a call then declares only
/// what its caller declared (see `input_relay::declared_upstream`).
pub(crate) fn gateway_capabilities() -> Value {
    json!({ "elicitation": { "form": {}, "url": {} }, "sampling": {}, "roots": {} })
}

/// Params of one of the gateway's own requests: `params` with the gateway's capabilities in
/// `_meta` (sent as the modern `_meta` to a 2026-07-28 server, ignored by earlier ones).
pub(crate) fn discovery_params(mut params: Value) -> Value {
    if let Value::Object(map) = &mut params {
        map.insert("_meta".to_owned(), json!({ CLIENT_CAPABILITIES_KEY: gateway_capabilities() }));
    }
    params
}

/// The lists a server offers, from the `capabilities` of its `server/discover` or
/// `initialize` result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Offered {
    /// `tools/list`.
    pub(crate) tools: bool,
    /// `prompts/list`.
    pub(crate) prompts: bool,
    /// `resources/list` and `resources/templates/list`.
    pub(crate) resources: bool,
}

impl Offered {
    /// What a result's `capabilities` offer; `None` when it has none (then nothing is known).
    pub(crate) fn from_result(result: &RawValue) -> Option<Self> {
        #[derive(Deserialize)]
        struct Result {
            capabilities: serde_json::Map<String, Value>,
        }
        let caps = serde_json::from_str::<Result>(result.get()).ok()?.capabilities;
        let offers = |key: &str| caps.get(key).is_some_and(|v| !v.is_null());
        Some(Self { tools: offers("tools"), prompts: offers("prompts"), resources: offers("resources") })
    }
}

/// A request's bytes: `params` (an object) gains the modern `_meta` keys when `era` is modern
/// (keys the caller already set, such as `progressToken`, are kept).
pub(crate) fn request(id: u64, method: &str, params: &mut Value, era: &Negotiated) -> Vec<u8> {
    if let Value::Object(map) = params
        && *era == Negotiated::Modern
    {
        let meta = map.entry("_meta").or_insert_with(|| json!({}));
        if let Value::Object(meta) = meta {
            meta.insert(PROTOCOL_VERSION_KEY.to_owned(), Value::String(MODERN_VERSION.to_owned()));
            meta.entry(CLIENT_CAPABILITIES_KEY.to_owned()).or_insert_with(|| json!({}));
            meta.insert(CLIENT_INFO_KEY.to_owned(), client_info());
        }
    }
    #[derive(serde::Serialize)]
    struct Envelope<'a> {
        jsonrpc: &'static str,
        id: u64,
        method: &'a str,
        params: &'a Value,
    }
    serde_json::to_vec(&Envelope { jsonrpc: "2.0", id, method, params }).unwrap_or_default()
}

/// A notification's bytes.
pub(crate) fn notification(method: &str, params: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({ "jsonrpc": "2.0", "method": method, "params": params })).unwrap_or_default()
}

/// `notifications/cancelled` for one of our requests.
pub(crate) fn cancelled(id: u64) -> Vec<u8> {
    notification("notifications/cancelled", json!({ "requestId": id, "reason": "cancelled by the client" }))
}

/// `initialize` params asking for `version`. Form elicitation is declared: a 2025-11-25
/// upstream task's questions reach the client of the gateway task (see `task_relay`); any
/// other request of the server's is refused at once.
pub(crate) fn initialize_params(version: &str) -> Value {
    json!({ "protocolVersion": version, "capabilities": { "elicitation": {} }, "clientInfo": client_info() })
}

/// Legacy versions the gateway can speak in a session.
pub(crate) const LEGACY_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// The version an `initialize` result chose, if the gateway speaks it.
pub(crate) fn negotiated_from_initialize(result: &RawValue) -> Result<Negotiated, UpstreamError> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Init {
        protocol_version: String,
    }
    let init: Init = serde_json::from_str(result.get())
        .map_err(|e| UpstreamError::Protocol { detail: "initialize result".to_owned(), source: Some(cause(e)) })?;
    if LEGACY_VERSIONS.contains(&init.protocol_version.as_str()) {
        Ok(Negotiated::Legacy { version: init.protocol_version })
    } else {
        Err(UpstreamError::protocol(format!(
            "the server chose protocol version {:?}, which mcpgate does not speak",
            clip(&init.protocol_version)
        )))
    }
}

/// Whether a `server/discover` result offers 2026-07-28.
pub(crate) fn discover_offers_modern(result: &RawValue) -> bool {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Discover {
        #[serde(default)]
        supported_versions: Vec<String>,
    }
    serde_json::from_str::<Discover>(result.get())
        .is_ok_and(|d| d.supported_versions.iter().any(|v| v == MODERN_VERSION))
}

/// One message from an upstream.
#[derive(Debug)]
pub(crate) enum Inbound {
    /// The answer to our request `id`.
    Response { id: u64, outcome: Result<Box<RawValue>, UpstreamError> },
    /// `notifications/progress` for the request that sent `token`.
    Progress { token: u64, progress: Progress },
    /// Another notification (list changes, logs): its method.
    Notification { method: String },
    /// A request from the server to the client (ping, sampling, ...).
    Request(ServerRequest),
}

/// A request from an upstream to mcpgate as its client.
#[derive(Debug)]
pub(crate) struct ServerRequest {
    /// Its raw JSON-RPC id (the answer echoes it).
    pub(crate) id: Box<RawValue>,
    /// Its method.
    pub(crate) method: String,
    /// Its params, raw.
    pub(crate) params: Option<Box<RawValue>>,
}

impl ServerRequest {
    /// The upstream task it belongs to (2025-11-25 `related-task` `_meta`), if any.
    pub(crate) fn related_task(&self) -> Option<String> {
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "_meta", default)]
            meta: Option<Meta>,
        }
        #[derive(Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/related-task", default)]
            related: Option<Related>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Related {
            task_id: String,
        }
        let params: Params = serde_json::from_str(self.params.as_deref()?.get()).ok()?;
        params.meta?.related.map(|r| r.task_id)
    }
}

/// A JSON-RPC response to a server's request `id`: `result` (raw JSON) or an error.
pub(crate) fn response(id: &RawValue, outcome: Result<&str, (i64, &str)>) -> Vec<u8> {
    match outcome {
        Ok(result) => format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, id.get()).into_bytes(),
        Err((code, message)) => serde_json::to_vec(&json!({
            "jsonrpc": "2.0",
            "id": serde_json::from_str::<Value>(id.get()).unwrap_or(Value::Null),
            "error": { "code": code, "message": message },
        }))
        .unwrap_or_default(),
    }
}

/// A progress report relayed from an upstream.
#[derive(Debug, Clone, PartialEq)]
pub struct Progress {
    /// Progress so far.
    pub progress: f64,
    /// Total, when known.
    pub total: Option<f64>,
    /// A message.
    pub message: Option<String>,
}

#[derive(Deserialize)]
struct Envelope {
    #[serde(default)]
    id: Option<Box<RawValue>>,
    #[serde(default)]
    method: Option<String>,
    #[serde(default)]
    params: Option<Box<RawValue>>,
    #[serde(default)]
    result: Option<Box<RawValue>>,
    #[serde(default)]
    error: Option<ErrorBody>,
}

#[derive(Deserialize)]
struct ErrorBody {
    code: i64,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProgressBody {
    progress_token: Value,
    progress: f64,
    #[serde(default)]
    total: Option<f64>,
    #[serde(default)]
    message: Option<String>,
}

/// Parses one message; `Err` (an invalid answer) describes garbage (not JSON, not JSON-RPC).
pub(crate) fn parse(bytes: &[u8]) -> Result<Inbound, UpstreamError> {
    let env: Envelope = serde_json::from_slice(bytes)
        .map_err(|e| UpstreamError::Protocol { detail: "not a JSON-RPC message".to_owned(), source: Some(cause(e)) })?;
    match (env.method, env.id) {
        (Some(method), Some(id)) => Ok(Inbound::Request(ServerRequest { id, method, params: env.params })),
        (Some(method), None) => {
            if method == "notifications/progress"
                && let Some(params) = env.params
                && let Ok(p) = serde_json::from_str::<ProgressBody>(params.get())
                && let Some(token) = p.progress_token.as_u64()
            {
                return Ok(Inbound::Progress {
                    token,
                    progress: Progress { progress: p.progress, total: p.total, message: p.message },
                });
            }
            Ok(Inbound::Notification { method })
        }
        (None, Some(id)) => {
            let id: u64 = serde_json::from_str(id.get())
                .map_err(|_| UpstreamError::protocol("a response to an id mcpgate never sent"))?;
            let outcome = match (env.result, env.error) {
                (Some(result), None) => Ok(result),
                (None, Some(e)) => Err(UpstreamError::Rpc { code: e.code, message: clip(&e.message) }),
                _ => Err(UpstreamError::protocol("a response with neither result nor error")),
            };
            Ok(Inbound::Response { id, outcome })
        }
        (None, None) => Err(UpstreamError::protocol("a message with neither method nor id")),
    }
}

/// The reply to a server→client request nobody takes (only a tracked upstream task's are
/// relayed), or `{}` to a ping.
pub(crate) fn reply_to_server_request(id: &RawValue, method: &str) -> Vec<u8> {
    let body = if method == "ping" {
        format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{}}}}"#, id.get())
    } else {
        format!(
            r#"{{"jsonrpc":"2.0","id":{},"error":{{"code":-32601,"message":"mcpgate does not serve {} to upstreams"}}}}"#,
            id.get(),
            method.replace(['"', '\\'], "")
        )
    };
    body.into_bytes()
}

/// Finds `"id":<digits>` near the start of a message too large to parse, so the one call it
/// answers can fail clearly.
pub(crate) fn sniff_id(prefix: &[u8]) -> Option<u64> {
    let text = String::from_utf8_lossy(&prefix[..prefix.len().min(512)]);
    let at = text.find("\"id\"")?;
    let rest = text[at + 4..].trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Text from an upstream, clipped for messages and logs.
pub(crate) fn clip(text: &str) -> String {
    mcpgate_protocol::quote::clip(text, 512)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modern_requests_carry_meta_and_keep_the_callers() {
        let bytes =
            request(3, "tools/call", &mut json!({"name": "x", "_meta": {"progressToken": 3}}), &Negotiated::Modern);
        let v: Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(v["params"]["_meta"][PROTOCOL_VERSION_KEY], MODERN_VERSION);
        assert_eq!(v["params"]["_meta"]["progressToken"], 3);
        assert!(v["params"]["_meta"][CLIENT_CAPABILITIES_KEY].is_object());
        let legacy = request(4, "tools/list", &mut json!({}), &Negotiated::Legacy { version: "2025-11-25".into() });
        let v: Value = serde_json::from_slice(&legacy).unwrap();
        assert!(v["params"].get("_meta").is_none());
    }

    #[test]
    fn parses_responses_progress_and_garbage() {
        let r = parse(br#"{"jsonrpc":"2.0","id":7,"result":{"content":[]}}"#).unwrap();
        assert!(matches!(r, Inbound::Response { id: 7, outcome: Ok(_) }));
        let e = parse(br#"{"jsonrpc":"2.0","id":8,"error":{"code":-32602,"message":"bad"}}"#).unwrap();
        assert!(matches!(e, Inbound::Response { id: 8, outcome: Err(UpstreamError::Rpc { code: -32602, .. }) }));
        let p = parse(br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":9,"progress":1,"total":2}}"#)
            .unwrap();
        assert!(matches!(p, Inbound::Progress { token: 9, .. }));
        assert!(matches!(parse(br#"{"jsonrpc":"2.0","id":"s","method":"ping"}"#).unwrap(), Inbound::Request(_)));
        let Ok(Inbound::Request(asked)) = parse(
            br#"{"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{"message":"m","_meta":{"io.modelcontextprotocol/related-task":{"taskId":"t-9"}}}}"#,
        ) else {
            panic!("a request")
        };
        assert_eq!(asked.related_task().as_deref(), Some("t-9"));
        assert_eq!(response(&asked.id, Ok("{}")), br#"{"jsonrpc":"2.0","id":3,"result":{}}"#.to_vec());
        assert!(parse(b"hello").is_err());
        assert_eq!(sniff_id(br#"{"jsonrpc":"2.0","id": 42,"result":{"#), Some(42));
    }
}
