//! A small MCP-over-HTTP client for both eras, shared by `mcpgate-loadgen` and the end-to-end
//! harness: [`McpRequest`] builds one JSON-RPC request with the headers its era requires,
//! [`Client`] posts it and reads the reply (bounded), [`Connections`] does the same leaner on
//! keep-alive HTTP/1.1 connections to one plain-`http://` endpoint, and [`Reply`] finds the
//! JSON-RPC response in it, whether the body is JSON or an SSE stream.
//!
//! Invariants: the wire vocabulary (header names, mirrored values and their encoding, `_meta`
//! keys, protocol versions) comes from `mcpgate-protocol`, never spelled here; no reply body
//! is buffered past the client's `max_body`.

mod client;
mod connections;
mod error;
mod reply;
mod request;

pub use client::Client;
pub use connections::Connections;
pub use error::ClientError;
pub use reply::{Reply, Response, RpcError};
pub use request::McpRequest;
