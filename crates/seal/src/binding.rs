//! What a sealed token is bound to: purpose, principal, method and a context digest. These
//! become AES-GCM associated data, so a token opens only where it was minted.
//!
//! Invariant: every field is length-prefixed in the associated data, so no two different
//! bindings produce the same bytes (no "ab"+"c" = "a"+"bc" splicing).

use sha2::{Digest, Sha256};

/// What a token is for; tokens never cross purposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Purpose {
    /// MRTR `requestState` of one call.
    RequestState,
    /// A legacy `Mcp-Session-Id`.
    Session,
    /// An id of a legacy server→client input request inside a task.
    TaskInput,
    /// A payload field of a task record stored at rest (see [`crate::AtRest`]).
    AtRest,
    /// A step of connecting a user's account at an upstream: the connect link, and the
    /// `state` of the sign-in and of the authorization that follow it.
    OAuthFlow,
}

impl Purpose {
    fn label(self) -> &'static [u8] {
        match self {
            Self::RequestState => b"mcpgate/request-state",
            Self::Session => b"mcpgate/session",
            Self::TaskInput => b"mcpgate/task-input",
            Self::AtRest => b"mcpgate/at-rest",
            Self::OAuthFlow => b"mcpgate/oauth-flow",
        }
    }
}

/// The context a token is sealed in and must be opened in.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// What the token is for.
    pub purpose: Purpose,
    /// Who it was minted for (stable principal key, e.g. `iss` + `sub`).
    pub principal: &'a str,
    /// The JSON-RPC method it belongs to (empty when not method-specific).
    pub method: &'a str,
    /// A digest of anything else the token is only valid for (see [`context_digest`]).
    pub context: &'a [u8; 32],
}

impl Binding<'_> {
    /// Writes the associated data for this binding and key id into `out`.
    pub(crate) fn write_aad(&self, version: &str, key_id: &str, out: &mut Vec<u8>) {
        out.clear();
        for part in [
            b"mcpgate-seal".as_slice(),
            version.as_bytes(),
            key_id.as_bytes(),
            self.purpose.label(),
            self.principal.as_bytes(),
            self.method.as_bytes(),
            self.context.as_slice(),
        ] {
            push_framed(out, part);
        }
    }
}

/// SHA-256 over length-prefixed parts: the caller's way to bind a token to, say, a tool
/// name, an arguments digest and a protocol version.
pub fn context_digest(parts: &[&[u8]]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hasher.update(part);
    }
    hasher.finalize().into()
}

fn push_framed(out: &mut Vec<u8>, part: &[u8]) {
    out.extend_from_slice(&u32::try_from(part.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(part);
}
