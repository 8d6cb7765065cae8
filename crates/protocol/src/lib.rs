//! Pure MCP wire types for both protocol eras served by mcpgate: 2025-11-25 ("legacy",
//! `initialize` handshake, core tasks) and 2026-07-28 ("modern", per-request `_meta`, MRTR,
//! the tasks extension).
//!
//! This crate does no I/O and uses no HTTP stack: it decodes untrusted bytes into typed
//! messages (never panicking on any input) and describes what the gateway writes back. Of the
//! HTTP transport it knows only the vocabulary: header names ([`headers`]) and which values a
//! request mirrors into them, and how ([`mirrored`]).
//! `README.md` next to this crate explains how the two eras differ.

pub mod authority;
pub mod capabilities;
pub mod completion;
pub mod content;
pub mod discover;
pub mod elicitation;
pub mod error_code;
pub mod headers;
pub mod implementation;
pub mod initialize;
pub mod input;
pub mod jsonrpc;
pub mod meta;
pub mod method;
pub mod mirrored;
pub mod pagination;
pub mod prompt;
pub mod quote;
pub mod relayed;
pub mod resource;
pub mod result;
pub mod roots;
pub mod sampling;
pub mod subscription;
pub mod task;
pub mod tool;
pub mod version;

pub use error_code::{ErrorCode, ErrorObject};
pub use jsonrpc::{Incoming, RequestId, decode, decode_params};
pub use method::Method;
pub use version::{Era, ProtocolVersion};

/// A JSON object (`{string: any}`).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

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
    /// A mirrored header's value cannot be decoded (see [`mirrored::decode`]).
    #[error("{problem}")]
    HeaderValue {
        /// What is wrong, worded to follow the header's name.
        problem: &'static str,
    },
}
