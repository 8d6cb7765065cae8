//! The client against a real HTTP peer on loopback: what a request looks like on the wire,
//! and how replies (JSON, SSE, oversized, error statuses) are read.

mod wire;
