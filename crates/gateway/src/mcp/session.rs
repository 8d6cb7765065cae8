//! Legacy (2025-11-25) sessions without server state: the `Mcp-Session-Id` is a sealed blob
//! holding the negotiated version, the client's capabilities and info, bound to the principal
//! that initialized it and valid until it expires, so any replica can serve any request of
//! the session.
//!
//! Threat model: a client may present another principal's session id, a tampered one, an
//! expired one or one sealed for another purpose; all of them are "session not found" (404),
//! which tells a legacy client to initialize again. Sessions cannot be revoked before expiry
//! (there is no state to revoke), which is why their lifetime is bounded by configuration.

use crate::time::now_ms;

use serde::{Deserialize, Serialize};

use mcpgate_protocol::ProtocolVersion;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_seal::{Binding, Purpose, SealError, Sealer};

use crate::config::{AnonymousScope, AuthMode, Config};
use crate::error::GatewayError;
use crate::metrics::Metrics;
use mcpgate_runtime::Principal;

/// What a legacy session id carries.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Session {
    /// Negotiated protocol version.
    #[serde(rename = "v")]
    pub version: String,
    /// Client capabilities from `initialize`.
    #[serde(rename = "c")]
    pub capabilities: ClientCapabilities,
    /// Client info from `initialize`.
    #[serde(rename = "i", default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<Implementation>,
    /// The virtual server it was initialized on (`None`: the root endpoint): it serves there
    /// only.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
}

impl Session {
    /// The negotiated version, if it is one this build speaks.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        ProtocolVersion::parse(&self.version)
    }
}

const NO_CONTEXT: [u8; 32] = [0; 32];

fn binding(principal: &Principal) -> Binding<'_> {
    Binding { purpose: Purpose::Session, principal: principal.key(), method: "", context: &NO_CONTEXT }
}

/// A session's identity: a digest of its id as the client sends it (every `initialize` seals
/// with a fresh random nonce, so no two sessions share it). Surrounding whitespace is not
/// part of the id.
pub fn identity(token: &str) -> [u8; 32] {
    mcpgate_seal::context_digest(&[b"session", token.trim().as_bytes()])
}

/// Who a legacy session's messages act as. Under `auth.mode = none` every caller is the one
/// anonymous principal, so with `tasks.anonymous_scope = "session"` it is narrowed to the
/// session: one anonymous session never sees another's tasks. Every path that handles a
/// session's messages (requests, responses, notifications) goes through here, so they agree.
pub fn acting_principal(config: &Config, principal: Principal, session: &[u8; 32]) -> Principal {
    if config.auth.mode == AuthMode::None && config.tasks.anonymous_scope == AnonymousScope::Session {
        principal.within(session)
    } else {
        principal
    }
}

/// Seals a new session for `principal`.
pub fn mint(sealer: &Sealer, principal: &Principal, session: &Session, ttl_secs: u64) -> Result<String, GatewayError> {
    let payload = serde_json::to_vec(session).map_err(|e| GatewayError::internal_caused("session encoding", e))?;
    let expires = now_ms().saturating_add(ttl_secs.saturating_mul(1000));
    sealer.seal(&binding(principal), expires, &payload).map_err(|e| match e {
        SealError::TooLarge { .. } => GatewayError::invalid_params("client capabilities and client info are too large"),
        other => GatewayError::internal_caused("sealing a session", other),
    })
}

/// Opens a session id presented by `principal`.
pub fn open(sealer: &Sealer, metrics: &Metrics, principal: &Principal, token: &str) -> Result<Session, GatewayError> {
    let payload = sealer.open(&binding(principal), now_ms(), token).map_err(|e| {
        let reason = e.open_failure().map_or("unusable", |r| {
            metrics.seal_failure(r);
            r.as_str()
        });
        tracing::debug!(reason, "session id rejected");
        GatewayError::SessionNotFound { reason }
    })?;
    serde_json::from_slice(&payload).map_err(|_| GatewayError::SessionNotFound { reason: "undecodable" })
}
