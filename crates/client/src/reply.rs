//! A reply as read off the wire (status, the headers MCP clients look at, the body) and the
//! JSON-RPC response found in it.
//!
//! Invariant: the response to a request is the JSON body itself, or, on an SSE stream, the
//! first `data:` message that answers the request's id (notifications and the server's own
//! requests before it are skipped); a message is a response only if it has `result` or
//! `error`, and `error` wins when it has both.

use serde::Deserialize as _;
use serde_json::Value;

use mcpgate_protocol::RequestId;

/// An HTTP reply to an MCP request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `Mcp-Session-Id`, if any.
    pub session: Option<String>,
    /// `Content-Type` (empty when absent).
    pub content_type: String,
    /// `Retry-After`, if any.
    pub retry_after: Option<String>,
    /// The body (invalid UTF-8 replaced).
    pub body: String,
}

impl Reply {
    /// Whether the body is an SSE stream.
    pub fn is_sse(&self) -> bool {
        self.content_type.starts_with("text/event-stream")
    }

    /// The body as JSON.
    ///
    /// # Errors
    ///
    /// [`ClientError::NotJson`](crate::error::ClientError::NotJson), quoting the body (clipped).
    pub fn json(&self) -> Result<Value, crate::error::ClientError> {
        serde_json::from_str(&self.body).map_err(|source| crate::error::ClientError::NotJson {
            body: mcpgate_protocol::quote::clip(&self.body, 2_000),
            source,
        })
    }

    /// The `data:` messages of an SSE body, in order.
    ///
    /// # Errors
    ///
    /// The first message that is not JSON.
    pub fn events(&self) -> Result<Vec<Value>, serde_json::Error> {
        self.body.lines().filter_map(|l| l.strip_prefix("data: ")).map(serde_json::from_str).collect()
    }

    /// The message that answers request `id`: a JSON body (whatever its id: an error about
    /// an unreadable request has none), or the first message on an SSE stream that is not a
    /// request or notification and carries `id`. `None`: no such message (a stream cut
    /// before its answer, or a body that is not JSON).
    pub fn message(&self, id: &RequestId) -> Option<Value> {
        if !self.is_sse() {
            return serde_json::from_str(&self.body).ok();
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str::<Value>(data).ok())
            .find(|m| {
                m.get("method").is_none()
                    && m.get("id").and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok()).as_ref()
                        == Some(id)
            })
    }

    /// The JSON-RPC response to request `id` (see [`Reply::message`] and [`Response::parse`]).
    pub fn response(&self, id: &RequestId) -> Option<Response> {
        Response::from_message(self.message(id)?)
    }
}

/// A JSON-RPC response.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id it answers (`None`: absent or unreadable).
    pub id: Option<RequestId>,
    /// The result, or the error.
    pub outcome: Result<Value, RpcError>,
}

impl Response {
    /// [`Response::parse`], taking the message: its result is moved out, not copied.
    pub fn from_message(mut message: Value) -> Option<Self> {
        if message.get("error").is_some() {
            return Self::parse(&message);
        }
        let result = message.as_object_mut()?.remove("result")?;
        let id = message.get("id").and_then(|v| RequestId::deserialize(v).ok());
        Some(Self { id, outcome: Ok(result) })
    }

    /// Reads a message as a response: `error` if it has one, else `result`; `None` when it
    /// has neither. A malformed error object still counts (code 0, empty message).
    pub fn parse(message: &Value) -> Option<Self> {
        let id = message.get("id").and_then(|v| serde_json::from_value(v.clone()).ok());
        let outcome = match (message.get("error"), message.get("result")) {
            (Some(error), _) => Err(RpcError {
                code: error["code"].as_i64().unwrap_or(0),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                data: error.get("data").cloned(),
            }),
            (None, Some(result)) => Ok(result.clone()),
            (None, None) => return None,
        };
        Some(Self { id, outcome })
    }
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// The code.
    pub code: i64,
    /// The message.
    pub message: String,
    /// Extra data, if any.
    pub data: Option<Value>,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reply(content_type: &str, body: &str) -> Reply {
        Reply {
            status: 200,
            session: None,
            content_type: content_type.to_owned(),
            retry_after: None,
            body: body.to_owned(),
        }
    }

    #[test]
    fn a_json_body_is_the_response() {
        let json = reply("application/json", r#"{"jsonrpc":"2.0","id":"a","result":{"ok":true}}"#);
        let response = json.response(&"a".into()).expect("a response");
        assert_eq!(response.outcome, Ok(json!({"ok": true})));
        assert_eq!(response.id, Some("a".into()));
        let error =
            reply("application/json", r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#);
        let response = error.response(&"a".into()).expect("errors without an id still answer");
        assert_eq!(response.outcome.expect_err("an error").code, -32700);
        assert_eq!(reply("text/plain", "bad gateway").message(&1.into()), None);
    }

    #[test]
    fn on_a_stream_the_answer_to_the_id_is_found() {
        let body = [
            r#"data: {"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}"#,
            "",
            r#"data: {"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{}}"#,
            "",
            r#"data: {"jsonrpc":"2.0","id":2,"result":{"other":true}}"#,
            "",
            ": keep-alive",
            r#"data: {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom","data":{"x":1}},"result":{}}"#,
            "",
        ]
        .join("\n");
        let stream = reply("text/event-stream; charset=utf-8", &body);
        assert!(stream.is_sse());
        assert_eq!(stream.events().expect("JSON events").len(), 4);
        let response = stream.response(&1.into()).expect("the answer");
        assert_eq!(
            response.outcome,
            Err(RpcError { code: -32603, message: "boom".to_owned(), data: Some(json!({"x": 1})) }),
            "error wins over result"
        );
        assert_eq!(stream.response(&2.into()).map(|r| r.outcome), Some(Ok(json!({"other": true}))));
        assert_eq!(stream.response(&"1".into()), None, "ids are typed: \"1\" is not 1");
        assert_eq!(stream.response(&3.into()), None, "a stream cut before its answer");
    }

    #[test]
    fn a_message_with_neither_result_nor_error_is_no_response() {
        assert_eq!(Response::parse(&json!({"jsonrpc": "2.0", "id": 1})), None);
        assert_eq!(Response::from_message(json!({"jsonrpc": "2.0", "id": 1})), None);
        for message in [
            json!({"jsonrpc": "2.0", "id": "x", "result": null}),
            json!({"id": 2, "result": {"a": [1]}, "error": {"code": -1, "message": "m"}}),
            json!({"id": 1.5, "result": 3}),
            json!({"error": "no object"}),
        ] {
            assert_eq!(Response::from_message(message.clone()), Response::parse(&message), "{message}");
        }
        let odd = Response::parse(&json!({"id": 1, "error": "no object"})).expect("still an error");
        assert_eq!(odd.outcome, Err(RpcError { code: 0, message: String::new(), data: None }));
    }
}
