//! One MCP request as it goes on the wire: its JSON-RPC body and the HTTP headers its era
//! requires.
//!
//! Invariants: a 2026-07-28 request always carries `_meta` with the protocol version (and
//! client capabilities, `{}` unless the caller names some), the matching
//! `MCP-Protocol-Version` header and the mirrored `Mcp-Method` / `Mcp-Name` derived from the
//! body by `mcpgate_protocol::mirrored`; a 2025-11-25 request in a session carries the
//! session id and the version; headers the caller adds come after those, in order.

use serde::Serialize;
use serde_json::{Map, Value, json};

use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use mcpgate_protocol::meta::{CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY};
use mcpgate_protocol::{ProtocolVersion, RequestId, mirrored};

/// A JSON-RPC request and its HTTP headers.
#[derive(Debug, Clone, PartialEq)]
pub struct McpRequest {
    id: RequestId,
    method: String,
    params: Value,
    headers: Vec<(String, String)>,
}

impl McpRequest {
    /// A 2026-07-28 request. `params._meta`, if the caller gives one, is laid over the
    /// defaults (`protocolVersion` 2026-07-28, `clientCapabilities` `{}`), so a caller can
    /// declare capabilities, client info or anything else; `null` params become `{}`.
    pub fn modern(id: impl Into<RequestId>, method: &str, params: Value) -> Self {
        let version = ProtocolVersion::LATEST_MODERN.as_str();
        let mut params = if params.is_null() { Value::Object(Map::new()) } else { params };
        if let Value::Object(members) = &mut params {
            let mut meta = Map::new();
            meta.insert(PROTOCOL_VERSION_KEY.to_owned(), json!(version));
            meta.insert(CLIENT_CAPABILITIES_KEY.to_owned(), json!({}));
            if let Some(Value::Object(given)) = members.remove("_meta") {
                meta.extend(given);
            }
            members.insert("_meta".to_owned(), Value::Object(meta));
        }
        let mut headers = vec![(MCP_PROTOCOL_VERSION.to_owned(), version.to_owned())];
        headers.extend(mirrored::routing_headers(method, &params).into_iter().map(|(k, v)| (k.to_owned(), v)));
        Self { id: id.into(), method: method.to_owned(), params, headers }
    }

    /// A 2025-11-25 request: in `session` when given (with its id and the version), else
    /// outside any (`initialize`).
    pub fn legacy(id: impl Into<RequestId>, method: &str, params: Value, session: Option<&str>) -> Self {
        let headers = match session {
            Some(session) => vec![
                (MCP_SESSION_ID.to_owned(), session.to_owned()),
                (MCP_PROTOCOL_VERSION.to_owned(), ProtocolVersion::LATEST_LEGACY.as_str().to_owned()),
            ],
            None => Vec::new(),
        };
        Self { id: id.into(), method: method.to_owned(), params, headers }
    }

    /// Adds a header (say, `authorization`), sent after the era's own.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// The request id.
    pub fn id(&self) -> &RequestId {
        &self.id
    }

    /// The method.
    pub fn method(&self) -> &str {
        &self.method
    }

    /// The params as sent (with `_meta` for a 2026-07-28 request).
    pub fn params(&self) -> &Value {
        &self.params
    }

    /// The headers, in the order they are sent.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The JSON-RPC body.
    pub fn body(&self) -> String {
        // Written from borrowed parts: the params are not copied into a message tree first.
        #[derive(Serialize)]
        struct Body<'a> {
            jsonrpc: &'static str,
            id: &'a RequestId,
            method: &'a str,
            params: &'a Value,
        }
        let body = Body { jsonrpc: "2.0", id: &self.id, method: &self.method, params: &self.params };
        // A `Value` with string keys and an id always serialize.
        serde_json::to_string(&body).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use mcpgate_protocol::headers::{MCP_METHOD, MCP_NAME};

    use super::*;

    fn header<'a>(request: &'a McpRequest, name: &str) -> Vec<&'a str> {
        request.headers().iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }

    #[test]
    fn a_modern_request_mirrors_its_body() {
        let request = McpRequest::modern(1, "tools/call", json!({"name": "echo", "arguments": {"text": "a"}}));
        assert_eq!(header(&request, MCP_PROTOCOL_VERSION), ["2026-07-28"]);
        assert_eq!(header(&request, MCP_METHOD), ["tools/call"]);
        assert_eq!(header(&request, MCP_NAME), ["echo"]);
        assert!(header(&request, MCP_SESSION_ID).is_empty());
        let body: Value = serde_json::from_str(&request.body()).expect("JSON");
        assert_eq!(
            body,
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "echo", "arguments": {"text": "a"},
                "_meta": {PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: {}},
            }})
        );
    }

    #[test]
    fn the_callers_meta_is_laid_over_the_defaults() {
        let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
        let params = json!({"taskId": "t-1", "_meta": {CLIENT_CAPABILITIES_KEY: caps, "progressToken": 7}});
        let request = McpRequest::modern("a", "tasks/get", params);
        assert_eq!(
            request.params()["_meta"],
            json!({PROTOCOL_VERSION_KEY: "2026-07-28", CLIENT_CAPABILITIES_KEY: caps, "progressToken": 7})
        );
        assert_eq!(header(&request, MCP_NAME), ["t-1"]);
        assert_eq!(request.id(), &RequestId::String("a".to_owned()));
        let bare = McpRequest::modern(2, "tools/list", Value::Null);
        assert_eq!(bare.params()["_meta"][PROTOCOL_VERSION_KEY], "2026-07-28");
        assert!(header(&bare, MCP_NAME).is_empty(), "tools/list mirrors no name");
    }

    #[test]
    fn names_that_are_not_plain_ascii_are_encoded() {
        let request = McpRequest::modern(1, "resources/read", json!({"uri": "file:///ré"}));
        assert_eq!(header(&request, MCP_NAME), ["=?base64?ZmlsZTovLy9yw6k=?="]);
    }

    #[test]
    fn a_legacy_request_names_its_session() {
        let request = McpRequest::legacy(1, "tools/list", json!({}), Some("s-1")).header("authorization", "Bearer x");
        assert_eq!(
            request.headers(),
            [
                (MCP_SESSION_ID.to_owned(), "s-1".to_owned()),
                (MCP_PROTOCOL_VERSION.to_owned(), "2025-11-25".to_owned()),
                ("authorization".to_owned(), "Bearer x".to_owned()),
            ]
        );
        assert!(McpRequest::legacy(1, "initialize", json!({}), None).headers().is_empty());
        let body: Value =
            serde_json::from_str(&McpRequest::legacy(1, "tools/list", json!({}), None).body()).expect("JSON");
        assert_eq!(body, json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}));
    }
}
