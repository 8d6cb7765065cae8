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
mod error;
pub mod error_code;
pub mod headers;
pub mod implementation;
pub mod initialize;
pub mod input;
mod json;
pub mod jsonrpc;
pub mod meta;
pub mod method;
pub mod mirrored;
pub mod pagination;
pub mod prompt;
pub mod quote;
pub mod relayed;
mod request_id;
pub mod resource;
pub mod result;
pub mod roots;
pub mod sampling;
pub mod subscription;
pub mod task;
pub mod tool;
pub mod version;

pub use error::ProtocolError;
pub use error_code::{ErrorCode, ErrorObject};
pub use json::JsonObject;
pub use jsonrpc::{Incoming, RequestId, decode, decode_params};
pub use method::Method;
pub use version::{Era, ProtocolVersion};
