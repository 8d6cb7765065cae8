//! Authentication of every request: who is calling.
//!
//! Threat model: any network peer may call the endpoint with a missing, malformed, forged,
//! expired or foreign-audience token, or one signed with `alg: none` or an algorithm meant for
//! another key type. Only tokens signed by a configured key with an allowed algorithm, for our
//! issuer and audience, within their validity window, produce a principal. Tokens are never
//! logged or forwarded. `auth.mode = none` makes every caller one anonymous principal and is
//! refused on non-loopback addresses unless explicitly allowed.

mod jwks;
mod jwt;

use std::sync::Arc;

use axum::http::HeaderMap;

use mcpgate_runtime::Principal;

use crate::config::{AuthMode, Config};
use crate::error::{GatewayError, StartupError};
use jwt::JwtAuthenticator;

/// Turns request headers into a principal.
#[derive(Debug, Clone)]
pub(crate) enum Authenticator {
    /// `auth.mode = none`.
    Anonymous(Principal),
    /// `auth.mode = jwt`.
    Jwt(Arc<JwtAuthenticator>),
}

impl Authenticator {
    /// Builds the authenticator: loads key files and JWKS documents named in the config.
    /// `servers`: the virtual servers' protected resources (each its own tokens' audience).
    pub(crate) fn from_config(config: &Config, servers: &[String]) -> Result<Self, StartupError> {
        match config.auth.mode {
            AuthMode::None => Ok(Self::Anonymous(Principal::anonymous())),
            AuthMode::Jwt => Ok(Self::Jwt(Arc::new(JwtAuthenticator::from_config(config, servers)?))),
        }
    }

    /// Authenticates one request to the root endpoint (or a route of no virtual server).
    pub(crate) async fn authenticate(&self, headers: &HeaderMap) -> Result<Principal, GatewayError> {
        self.authenticate_for(headers, None).await
    }

    /// Authenticates one request to the virtual server whose protected resource is `server`
    /// (`None`: the root): a token for another server is refused.
    pub(crate) async fn authenticate_for(
        &self,
        headers: &HeaderMap,
        server: Option<&str>,
    ) -> Result<Principal, GatewayError> {
        match self {
            Self::Anonymous(p) => Ok(p.clone()),
            Self::Jwt(jwt) => jwt.authenticate(headers, server).await,
        }
    }
}

/// The URL of the protected resource metadata for a resource URI (RFC 9728 path insertion:
/// `https://host/mcp` → `https://host/.well-known/oauth-protected-resource/mcp`).
pub(crate) fn resource_metadata_url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].trim_end_matches('/')),
        None => (rest, ""),
    };
    format!("{scheme}://{authority}/.well-known/oauth-protected-resource{path}")
}
