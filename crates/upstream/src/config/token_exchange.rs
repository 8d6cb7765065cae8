//! `[upstream.token_exchange]`: per-user upstream tokens by OAuth 2.0 Token Exchange (RFC
//! 8693), and its validation.
//!
//! Invariant: the client secret is a credential — `Debug` never shows it, and errors name the
//! key, never the value.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ACCESS_TOKEN_TYPE, redact_url};

/// `[upstream.token_exchange]`: the caller's bearer token is exchanged at `token_url` (RFC
/// 8693) for a token meant for this upstream, which is what the upstream receives; the
/// caller's own token never is. `client_secret` is a credential: `${VAR}` expands in it, and
/// `Debug` never shows it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenExchangeConfig {
    /// The authorization server's token endpoint (https; http only on loopback).
    pub token_url: String,
    /// The gateway's client id at the authorization server (HTTP Basic authentication).
    pub client_id: String,
    /// Its client secret.
    pub client_secret: String,
    /// `audience`: the logical name of the upstream at the authorization server.
    #[serde(default)]
    pub audience: Option<String>,
    /// `resource`: the upstream's URI (RFC 8707).
    #[serde(default)]
    pub resource: Option<String>,
    /// `scope`: space-separated scopes asked for.
    #[serde(default)]
    pub scope: Option<String>,
    /// What the caller's token is.
    #[serde(default = "default_token_type")]
    pub subject_token_type: String,
    /// What the upstream's token should be.
    #[serde(default = "default_token_type")]
    pub requested_token_type: String,
    /// Exchanged tokens kept per replica (one per caller token); past it, expired ones go first,
    /// then the oldest.
    #[serde(default = "default_cache_max_entries")]
    pub cache_max_entries: u64,
    /// How long one exchange may take (unset: 10 s, or the upstream's `timeout_secs` if shorter).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

fn default_token_type() -> String {
    ACCESS_TOKEN_TYPE.to_owned()
}
fn default_cache_max_entries() -> u64 {
    10_000
}

impl fmt::Debug for TokenExchangeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // client_secret is a credential: never shown.
        f.debug_struct("TokenExchangeConfig")
            .field("token_url", &redact_url(&self.token_url))
            .field("client_id", &self.client_id)
            .field("audience", &self.audience)
            .field("resource", &self.resource)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl TokenExchangeConfig {
    /// An exchange at `token_url` for `audience`; other keys take their defaults.
    pub fn new(token_url: &str, client_id: &str, client_secret: &str, audience: &str) -> Self {
        Self {
            token_url: token_url.to_owned(),
            client_id: client_id.to_owned(),
            client_secret: client_secret.to_owned(),
            audience: Some(audience.to_owned()),
            resource: None,
            scope: None,
            subject_token_type: default_token_type(),
            requested_token_type: default_token_type(),
            cache_max_entries: default_cache_max_entries(),
            timeout_secs: None,
        }
    }

    /// How long one exchange may take, given the upstream's call timeout.
    pub fn timeout(&self, upstream_timeout_secs: u64) -> Duration {
        Duration::from_secs(self.timeout_secs.unwrap_or_else(|| upstream_timeout_secs.min(10)))
    }

    /// Checks one `[upstream.token_exchange]` table; the error's key is relative to it.
    pub(super) fn validate(&self) -> Result<(), (&'static str, String)> {
        let url = self.token_url.as_str();
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() || authority.contains('@') {
            return Err(("token_url", "must be an absolute http(s) URL without credentials".to_owned()));
        }
        if !(scheme == "https" || scheme == "http" && mcpgate_protocol::authority::is_loopback_authority(authority)) {
            return Err(("token_url", "must be https (plain http is allowed only on loopback)".to_owned()));
        }
        if self.client_id.is_empty() {
            return Err(("client_id", "must not be empty".to_owned()));
        }
        if self.client_secret.is_empty() {
            return Err(("client_secret", "must not be empty".to_owned()));
        }
        // Without either, the exchanged token would carry the caller's authority to anyone.
        if self.audience.is_none() && self.resource.is_none() {
            return Err((
                "audience",
                "set audience or resource (or both): a token exchanged for no audience is not limited to this \
                 upstream"
                    .to_owned(),
            ));
        }
        if let Some(resource) = &self.resource
            && (!resource.contains("://") || resource.contains('#'))
        {
            return Err(("resource", "must be an absolute URI without a fragment (RFC 8707)".to_owned()));
        }
        for (key, value) in [
            ("audience", self.audience.as_deref()),
            ("scope", self.scope.as_deref()),
            ("subject_token_type", Some(self.subject_token_type.as_str())),
            ("requested_token_type", Some(self.requested_token_type.as_str())),
        ] {
            if value.is_some_and(|v| v.trim().is_empty() || v.chars().any(char::is_control)) {
                return Err((key, "must be non-empty text without control characters".to_owned()));
            }
        }
        if !(1..=1_000_000).contains(&self.cache_max_entries) {
            return Err(("cache_max_entries", "must be between 1 and 1000000".to_owned()));
        }
        if self.timeout_secs.is_some_and(|t| !(1..=300).contains(&t)) {
            return Err(("timeout_secs", "must be between 1 and 300".to_owned()));
        }
        Ok(())
    }
}
