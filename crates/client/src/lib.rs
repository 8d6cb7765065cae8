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
mod reply;
mod request;

pub use client::Client;
pub use connections::Connections;
pub use reply::{Reply, Response, RpcError};
pub use request::McpRequest;

/// Why a request got no reply that could be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The request was not sent, or no response came (connection refused or reset, timeout).
    #[error("POST {url}: {source}")]
    Send {
        /// Where it went.
        url: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The response started but its body could not be read to the end.
    #[error("reading the reply: {source}")]
    Read {
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The body is larger than the client accepts.
    #[error("the reply is larger than {max} bytes")]
    TooLarge {
        /// The client's `max_body`.
        max: usize,
    },
    /// A [`Connections`] exchange failed: no connection, or none that carried the reply.
    #[error("POST {url}: {source}")]
    Exchange {
        /// Where it went.
        url: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A [`Connections`] exchange (or its connecting) took longer than allowed.
    #[error("POST {url}: no reply within {secs} s")]
    TimedOut {
        /// Where it went.
        url: String,
        /// The bound.
        secs: u64,
    },
    /// The body is not the JSON it should be.
    #[error("not JSON ({source}): {body}")]
    NotJson {
        /// The body, clipped.
        body: String,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
}
