//! The one error type of the protocol crate: why a message could not be decoded.
//!
//! Invariant: every text here may reach a client as a JSON-RPC error message, so it says what
//! is wrong with the input without quoting it (the JSON parser's words, not its position).

use crate::request_id::RequestId;

/// Why a message could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// The body is not valid JSON.
    #[error("Parse error: {detail}")]
    Parse {
        /// What the JSON parser said (position info removed).
        detail: String,
    },
    /// The body is a JSON array; MCP allows one message per body.
    #[error("Invalid Request: batch requests are not supported; send one JSON-RPC message per request")]
    Batch,
    /// Valid JSON that is not a valid JSON-RPC 2.0 message.
    #[error("Invalid Request: {reason}")]
    InvalidRequest {
        /// What is wrong.
        reason: String,
        /// The id, when it could still be read.
        id: Option<RequestId>,
    },
    /// The params do not match the method's params type.
    #[error("Invalid params: {detail}")]
    InvalidParams {
        /// What is wrong.
        detail: String,
    },
    /// A mirrored header's value cannot be decoded (see [`mirrored::decode`](crate::mirrored::decode)).
    #[error("{problem}")]
    HeaderValue {
        /// What is wrong, worded to follow the header's name.
        problem: &'static str,
    },
}
