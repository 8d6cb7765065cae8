//! `auth = "oauth"` and `[upstream.oauth]`: each caller connects their own account at the
//! upstream's authorization server (the client side of the MCP authorization spec), and its
//! validation.
//!
//! Invariant: the client secret is a credential — `Debug` never shows it, and errors name the
//! key, never the value.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// How the gateway authorizes its requests to an upstream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UpstreamAuth {
    /// What `headers` (and `[upstream.token_exchange]`, when set) say: one identity for every
    /// caller, or the caller's exchanged token.
    #[default]
    Headers,
    /// Each caller's own account: OAuth 2.1 authorization code with PKCE on the caller's
    /// behalf, tokens kept sealed in the store (`[upstream.oauth]`).
    Oauth,
}

/// `[upstream.oauth]`: what cannot be discovered. Everything else (the authorization server,
/// its endpoints, the scopes) comes from the upstream's 401 challenge and metadata.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OAuthConfig {
    /// A client id registered beforehand at the upstream's authorization server (`${VAR}`
    /// expands); unset: a Client ID Metadata Document or Dynamic Client Registration.
    pub client_id: Option<String>,
    /// Its secret (`${VAR}` expands); unset: a public client.
    pub client_secret: Option<String>,
    /// The authorization server the client was registered at (its issuer URL): discovery uses
    /// only it, and an upstream naming another is refused before any request goes there.
    /// Required with `client_secret` (the secret goes only to the server it was issued by).
    pub issuer: Option<String>,
    /// Scopes asked for; unset: the challenge's, else the resource metadata's
    /// `scopes_supported`, else none.
    pub scopes: Vec<String>,
    /// How long one request to the authorization server may take.
    pub timeout_secs: Option<u64>,
    /// Whether the authorization server (its metadata, registration and token endpoints) may
    /// be at a loopback, private, link-local or other non-public address. Unset: public
    /// addresses only, and loopback where the upstream itself is on a loopback host (else an
    /// upstream's metadata could aim the gateway's requests at its own network).
    pub allow_private_addresses: bool,
}

impl fmt::Debug for OAuthConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // client_secret is a credential: never shown.
        f.debug_struct("OAuthConfig")
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<set>"))
            .field("issuer", &self.issuer)
            .field("scopes", &self.scopes)
            .field("timeout_secs", &self.timeout_secs)
            .field("allow_private_addresses", &self.allow_private_addresses)
            .finish()
    }
}

impl OAuthConfig {
    /// How long one request to the authorization server may take.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs.unwrap_or(10))
    }

    /// Checks one `[upstream.oauth]` table; the error's key is relative to it.
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        let text = |v: &str| !v.trim().is_empty() && !v.chars().any(char::is_control) && v.len() <= 1024;
        if self.client_id.as_deref().is_some_and(|v| !text(v)) {
            return Err(("client_id", "must be non-empty text without control characters".to_owned()));
        }
        if self.client_secret.as_deref().is_some_and(|v| !text(v)) {
            return Err(("client_secret", "must be non-empty text without control characters".to_owned()));
        }
        if self.client_secret.is_some() && self.client_id.is_none() {
            return Err(("client_secret", "needs client_id (the client it is the secret of)".to_owned()));
        }
        if self.client_secret.is_some() && self.issuer.is_none() {
            return Err((
                "issuer",
                "required with client_secret: the authorization server the client was registered at (else the \
                 secret goes to whichever server the upstream names)"
                    .to_owned(),
            ));
        }
        if let Some(issuer) = &self.issuer {
            let url = crate::oauth::secure_url(issuer, "issuer").map_err(|_| {
                ("issuer", "must be an https URL (http only on a loopback host), as the server names itself".to_owned())
            })?;
            if url.query().is_some() || url.fragment().is_some() {
                return Err(("issuer", "must be a URL without query or fragment".to_owned()));
            }
        }
        // RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E )
        if let Some(bad) = self
            .scopes
            .iter()
            .find(|s| s.is_empty() || !s.bytes().all(|b| b == 0x21 || (0x23..=0x7e).contains(&b) && b != 0x5c))
        {
            return Err((
                "scopes",
                format!("{:?} is not a scope token (RFC 6749 §3.3)", mcpgate_protocol::quote::clip(bad, 64)),
            ));
        }
        if self.timeout_secs.is_some_and(|t| !(1..=120).contains(&t)) {
            return Err(("timeout_secs", "must be between 1 and 120".to_owned()));
        }
        Ok(())
    }
}
