//! JSON-RPC 2.0 envelope: decoding one incoming message without copying its params, and the
//! shapes of outgoing responses, errors and notifications.
//!
//! Invariants: an id is a string or an integer, never `null` or fractional; a body is exactly
//! one message (batches are rejected, as MCP requires); `params` stay unparsed bytes borrowed
//! from the body until a handler decodes them into its own type, so a request is scanned once
//! for the envelope and once for its typed params, never re-serialized in between.

use std::borrow::Cow;

use serde::de::IgnoredAny;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::error::ProtocolError;
use crate::error_code::ErrorObject;
pub use crate::request_id::RequestId;

/// The only JSON-RPC version.
pub const JSONRPC_VERSION: &str = "2.0";

/// Longest serde detail echoed back to a client in a parse or params error.
const MAX_DETAIL: usize = 200;

/// One decoded incoming message; `params`/`result` borrow from the body.
#[derive(Debug)]
pub enum Incoming<'a> {
    /// A request expecting a response.
    Request(Request<'a>),
    /// A notification (no id, no response).
    Notification(Notification<'a>),
    /// A response to a server→client request (legacy clients POST these).
    Response(ResponseMessage<'a>),
}

/// An incoming request.
#[derive(Debug)]
pub struct Request<'a> {
    /// The id to echo.
    pub id: RequestId,
    /// Method name.
    pub method: Cow<'a, str>,
    /// Raw params, if any.
    pub params: Option<&'a RawValue>,
}

/// An incoming notification.
#[derive(Debug)]
pub struct Notification<'a> {
    /// Method name.
    pub method: Cow<'a, str>,
    /// Raw params, if any.
    pub params: Option<&'a RawValue>,
}

/// An incoming response (to a request the server sent).
#[derive(Debug)]
pub struct ResponseMessage<'a> {
    /// The id of the server's request.
    pub id: RequestId,
    /// The result, if it succeeded.
    pub result: Option<&'a RawValue>,
    /// The error, if it failed.
    pub error: Option<ErrorObject>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    jsonrpc: Option<Cow<'a, str>>,
    // Present-but-null must stay distinguishable from absent, so `null` is kept raw here.
    #[serde(borrow, default, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    method: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
    #[serde(borrow, default, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObject>,
}

fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
struct IdOnly<'a> {
    #[serde(borrow, default)]
    id: Option<&'a RawValue>,
}

/// Decodes one JSON-RPC message from a request body.
pub fn decode(body: &[u8]) -> Result<Incoming<'_>, ProtocolError> {
    let first = body.iter().copied().find(|b| !b.is_ascii_whitespace());
    match first {
        None => {
            return Err(ProtocolError::Parse { detail: "empty body".to_owned() });
        }
        Some(b'{') => {}
        Some(b'[') => {
            return match serde_json::from_slice::<IgnoredAny>(body) {
                Ok(_) => Err(ProtocolError::Batch),
                Err(e) => Err(ProtocolError::Parse { detail: detail(&e) }),
            };
        }
        Some(_) => {
            return match serde_json::from_slice::<IgnoredAny>(body) {
                Ok(_) => Err(invalid("message must be a JSON object", None)),
                Err(e) => Err(ProtocolError::Parse { detail: detail(&e) }),
            };
        }
    }
    let env: Envelope<'_> = match serde_json::from_slice(body) {
        Ok(env) => env,
        Err(e) if e.is_data() => return Err(invalid_with_detail(&e, salvage_id(body))),
        Err(e) => return Err(ProtocolError::Parse { detail: detail(&e) }),
    };
    let id = match env.id {
        None => None,
        Some(raw) => match serde_json::from_str::<RequestId>(raw.get()) {
            Ok(id) => Some(id),
            Err(_) => return Err(invalid("id must be a string or an integer", None)),
        },
    };
    if env.jsonrpc.as_deref() != Some(JSONRPC_VERSION) {
        return Err(invalid("jsonrpc must be \"2.0\"", id));
    }
    match (env.method, id) {
        (Some(method), Some(id)) => Ok(Incoming::Request(Request { id, method, params: env.params })),
        (Some(method), None) => Ok(Incoming::Notification(Notification { method, params: env.params })),
        (None, Some(id)) => match (env.result, env.error) {
            (Some(result), None) => Ok(Incoming::Response(ResponseMessage { id, result: Some(result), error: None })),
            (None, Some(error)) => Ok(Incoming::Response(ResponseMessage { id, result: None, error: Some(error) })),
            _ => Err(invalid("a response needs exactly one of result or error", Some(id))),
        },
        (None, None) => Err(invalid("missing method", None)),
    }
}

/// Decodes `params` into a method's own type. Absent params decode like `{}`, so a missing
/// required member is reported by name; params that are not an object are rejected.
pub fn decode_params<'a, T: Deserialize<'a>>(params: Option<&'a RawValue>) -> Result<T, ProtocolError> {
    let raw = params.map_or("{}", RawValue::get);
    if !raw.trim_start().starts_with('{') {
        return Err(ProtocolError::InvalidParams { detail: "params must be an object".to_owned() });
    }
    serde_json::from_str(raw).map_err(|e| ProtocolError::InvalidParams { detail: detail(&e) })
}

fn salvage_id(body: &[u8]) -> Option<RequestId> {
    let raw = serde_json::from_slice::<IdOnly<'_>>(body).ok()?.id?;
    serde_json::from_str(raw.get()).ok()
}

fn invalid(reason: &str, id: Option<RequestId>) -> ProtocolError {
    ProtocolError::InvalidRequest { reason: reason.to_owned(), id }
}

fn invalid_with_detail(e: &serde_json::Error, id: Option<RequestId>) -> ProtocolError {
    ProtocolError::InvalidRequest { reason: detail(e), id }
}

/// A serde error as a short client-safe sentence (position info dropped, length capped).
fn detail(e: &serde_json::Error) -> String {
    let mut s = e.to_string();
    if let Some(at) = s.find(" at line ") {
        s.truncate(at);
    }
    if s.len() > MAX_DETAIL {
        let mut cut = MAX_DETAIL;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// `{"jsonrpc":"2.0","id":…,"result":…}`.
#[derive(Debug, Serialize)]
pub struct ResultResponse<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

impl<'a, T: Serialize> ResultResponse<'a, T> {
    /// A success response.
    pub fn new(id: &'a RequestId, result: &'a T) -> Self {
        Self { jsonrpc: JSONRPC_VERSION, id, result }
    }
}

/// `{"jsonrpc":"2.0","id"?:…,"error":…}`; the id is omitted when it could not be read
/// (the 2026-07-28 schema allows no `null` id).
#[derive(Debug, Serialize)]
pub struct ErrorResponse<'a> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RequestId>,
    error: &'a ErrorObject,
}

impl<'a> ErrorResponse<'a> {
    /// An error response.
    pub fn new(id: Option<&'a RequestId>, error: &'a ErrorObject) -> Self {
        Self { jsonrpc: JSONRPC_VERSION, id, error }
    }
}

/// `{"jsonrpc":"2.0","method":…,"params":…}`.
#[derive(Debug, Serialize)]
pub struct OutgoingNotification<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

impl<'a, P: Serialize> OutgoingNotification<'a, P> {
    /// A notification.
    pub fn new(method: &'a str, params: &'a P) -> Self {
        Self { jsonrpc: JSONRPC_VERSION, method, params }
    }
}

/// `{"jsonrpc":"2.0","id":…,"method":…,"params":…}` (legacy server→client requests).
#[derive(Debug, Serialize)]
pub struct OutgoingRequest<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a P,
}

impl<'a, P: Serialize> OutgoingRequest<'a, P> {
    /// A request.
    pub fn new(id: &'a RequestId, method: &'a str, params: &'a P) -> Self {
        Self { jsonrpc: JSONRPC_VERSION, id, method, params }
    }
}
