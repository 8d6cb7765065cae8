//! What the gateway knows about one admitted request once its era rules have been applied.

use std::sync::Arc;

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::meta::{LoggingLevel, ProgressToken};
use mcpgate_protocol::{Era, Method, ProtocolVersion, RequestId};

use mcpgate_runtime::Principal;

use crate::servers::Endpoint;

/// An admitted request.
#[derive(Debug, Clone)]
pub(crate) struct CallContext {
    /// The JSON-RPC id.
    pub id: RequestId,
    /// The method.
    pub method: Method,
    /// The era the request follows.
    pub era: Era,
    /// The protocol version in force (modern: from `_meta`; legacy: from the session).
    pub version: ProtocolVersion,
    /// The caller.
    pub principal: Principal,
    /// What the client declared (modern: this request's `_meta`; legacy: at `initialize`);
    /// shared with the tool's context and with work that outlives the handler.
    pub capabilities: Arc<ClientCapabilities>,
    /// Progress opt-in.
    pub progress_token: Option<ProgressToken>,
    /// Log opt-in.
    pub log_level: Option<LoggingLevel>,
    /// Legacy: the identity of the sealed session (a digest of its id), so two sessions of
    /// one principal never share a task through idempotent creation.
    pub session: Option<[u8; 32]>,
    /// Modern: the client's idempotency key (`Idempotency-Key` header or
    /// `_meta["io.mcpgate/idempotencyKey"]`), validated.
    pub idempotency_key: Option<String>,
    /// The endpoint it came through (the root or a virtual server): what it may reach and
    /// under which rules.
    pub endpoint: Arc<Endpoint>,
}
