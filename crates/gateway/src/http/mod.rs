//! MCP over HTTP, the pieces the MCP layer and the endpoint share: the mirrored headers and
//! their checks, content negotiation and bounded body reading, and replies as JSON or SSE
//! frames.
//!
//! Invariant: these pieces know HTTP and the wire, not methods or handlers: nothing here
//! imports the MCP layer or the routes.

pub mod headers;
pub(crate) mod negotiate;
pub(crate) mod reply;
