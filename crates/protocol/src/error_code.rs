//! JSON-RPC and MCP error codes, and the error object that carries them.
//!
//! Invariant: only codes defined by JSON-RPC 2.0 or by MCP are named here; codes retired in
//! 2026-07-28 are marked `LEGACY_*`/`ACCEPTED_*` and are never sent to a modern request.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::capabilities::ClientCapabilities;

/// A JSON-RPC error code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ErrorCode(pub i32);

impl ErrorCode {
    /// Invalid JSON was received.
    pub const PARSE_ERROR: Self = Self(-32700);
    /// The JSON sent is not a valid request object (also: batches, which MCP forbids).
    pub const INVALID_REQUEST: Self = Self(-32600);
    /// Unknown method, or a method this server does not offer in the request's era.
    pub const METHOD_NOT_FOUND: Self = Self(-32601);
    /// Invalid params: bad or missing `_meta`, unknown tool/prompt/resource, bad arguments,
    /// bad cursor, unknown task, invalid `requestState`.
    pub const INVALID_PARAMS: Self = Self(-32602);
    /// Internal error; the message never carries internal detail.
    pub const INTERNAL_ERROR: Self = Self(-32603);
    /// HTTP headers missing, malformed or different from the body (2026-07-28).
    pub const HEADER_MISMATCH: Self = Self(-32020);
    /// The request needs a client capability it did not declare (2026-07-28).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: Self = Self(-32021);
    /// The requested protocol version is not supported (2026-07-28).
    pub const UNSUPPORTED_PROTOCOL_VERSION: Self = Self(-32022);
    /// Resource not found as 2025-11-25 and earlier spelled it; sent only to legacy sessions
    /// (2026-07-28 uses -32602).
    pub const LEGACY_RESOURCE_NOT_FOUND: Self = Self(-32002);
    /// URL elicitation required (2025-11-25 only): sent to a legacy client that declared URL
    /// elicitation when a call needs only URLs opened (connecting an account upstream).
    pub const ACCEPTED_LEGACY_URL_ELICITATION_REQUIRED: Self = Self(-32042);
}

/// The `error` member of a JSON-RPC error response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ErrorObject {
    /// The error code.
    pub code: ErrorCode,
    /// A short, client-safe description.
    pub message: String,
    /// Structured detail defined by the code (e.g. `requiredCapabilities`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with a code and a message and no data.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into(), data: None }
    }

    /// Attaches structured data.
    #[must_use]
    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    /// `-32021` with `data.requiredCapabilities` set to the capabilities the request lacked.
    pub fn missing_capability(message: impl Into<String>, required: &ClientCapabilities) -> Self {
        let data = MissingCapabilityData { required_capabilities: required.clone() };
        Self::new(ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, message)
            .with_data(serde_json::to_value(data).unwrap_or(Value::Null))
    }

    /// `-32022` with `data.supported` and `data.requested`.
    pub fn unsupported_version(supported: &[&str], requested: &str) -> Self {
        let data = UnsupportedVersionData {
            supported: supported.iter().map(|v| (*v).to_owned()).collect(),
            requested: requested.to_owned(),
        };
        Self::new(ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, format!("Unsupported protocol version: {requested}"))
            .with_data(serde_json::to_value(data).unwrap_or(Value::Null))
    }
}

/// `data` of a `-32021` error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MissingCapabilityData {
    /// The capabilities the request must declare.
    #[serde(rename = "requiredCapabilities")]
    pub required_capabilities: ClientCapabilities,
}

/// `data` of a `-32022` error.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnsupportedVersionData {
    /// Every version the server speaks, newest first.
    pub supported: Vec<String>,
    /// The version the client asked for.
    pub requested: String,
}
