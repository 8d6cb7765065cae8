//! The HTTP header names of MCP's Streamable HTTP transport, written once for the gateway, its
//! upstream client, the load generator and the test harness.
//!
//! Invariant: every name is lowercase (HTTP/2 sends names lowercase, and `http`'s
//! `HeaderName::from_static` accepts nothing else); names compare case-insensitively on the
//! wire, so a peer's `Mcp-Session-Id` is the same header.

/// `MCP-Protocol-Version`: the revision a request speaks (every POST of 2026-07-28; every
/// request after `initialize` in 2025-11-25).
pub const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// `Mcp-Session-Id`: the 2025-11-25 session an `initialize` answer names and later requests
/// carry (removed in 2026-07-28).
pub const MCP_SESSION_ID: &str = "mcp-session-id";

/// `Mcp-Method`: the request's method, mirrored from the body (2026-07-28, SEP-2243).
pub const MCP_METHOD: &str = "mcp-method";

/// `Mcp-Name`: the tool or prompt name, resource URI or task id a request is about, mirrored
/// from the body (2026-07-28; see [`crate::mirrored::name_member`]).
pub const MCP_NAME: &str = "mcp-name";

/// The prefix of `Mcp-Param-<Name>` headers, which mirror the tool arguments an input schema
/// annotates with `x-mcp-header` (see [`crate::mirrored::param_header`]).
pub const MCP_PARAM_PREFIX: &str = "mcp-param-";

/// `Last-Event-ID`: where a 2025-11-25 client resumes an SSE stream (SEP-1699).
pub const LAST_EVENT_ID: &str = "last-event-id";
