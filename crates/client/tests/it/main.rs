//! The client against a real HTTP peer on loopback: what a request looks like on the wire,
//! how replies (JSON, SSE, oversized, error statuses) are read, and how the lean
//! [`mcpgate_client::Connections`] transport keeps and replaces its connections.

mod connections;
mod wire;
