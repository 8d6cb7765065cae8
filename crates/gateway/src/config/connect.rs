//! The settings users' connections to `auth = "oauth"` upstreams need, checked together:
//! `server.public_url` (where browsers reach the gateway) and `[auth.browser_login]` (how the
//! user opening a connect link proves who they are).
//!
//! Invariant: a configuration with an `oauth` upstream that loads has a public URL a browser
//! can be sent to safely (https, or http only on a loopback host; no query or fragment), and
//! either a login client at the gateway's issuer or the explicit choice not to check the user.

use mcpgate_protocol::authority::is_loopback_authority;

use super::load::invalid_key;
use super::{AuthMode, Config};
use crate::error::StartupError;

/// Checks `server.public_url` and `[auth.browser_login]`.
pub(super) fn validate(c: &Config) -> Result<(), StartupError> {
    if let Some(url) = &c.server.public_url {
        validate_public_url(url)?;
    }
    if let Some(url) = &c.server.client_metadata_url {
        validate_client_metadata_url(url)?;
    }
    let login = &c.auth.browser_login;
    if login.client_id.as_deref().is_some_and(|id| id.trim().is_empty() || id.chars().any(char::is_control)) {
        return Err(invalid_key("auth.browser_login.client_id", "must be non-empty text without control characters"));
    }
    if login.client_secret.is_some() && login.client_id.is_none() {
        return Err(invalid_key("auth.browser_login.client_secret", "needs auth.browser_login.client_id"));
    }
    if login.verify_user && !login.scopes.iter().any(|s| s == "openid") {
        return Err(invalid_key("auth.browser_login.scopes", "must include openid (the sign-in is OpenID Connect)"));
    }
    let Some(oauth) = c.upstream.iter().find(|u| u.is_oauth()) else {
        return Ok(());
    };
    if c.server.public_url.is_none() {
        return Err(invalid_key(
            "server.public_url",
            &format!(
                "required by upstream {:?} (auth = \"oauth\"): users' browsers open connect links and return from \
                 its authorization server there",
                oauth.name
            ),
        ));
    }
    if c.auth.mode == AuthMode::Jwt && login.verify_user && login.client_id.is_none() {
        return Err(invalid_key(
            "auth.browser_login.client_id",
            &format!(
                "required by upstream {:?} (auth = \"oauth\"): whoever opens a connect link signs in at \
                 auth.jwt.issuer with this client first, so nobody can attach their account to another user's \
                 principal (or set auth.browser_login.verify_user = false, accepting that risk)",
                oauth.name
            ),
        ));
    }
    Ok(())
}

/// An absolute https URL (http only on a loopback host), without credentials, query or
/// fragment: a browser is sent there with sealed links.
fn validate_public_url(url: &str) -> Result<(), StartupError> {
    let bad = |problem: &str| Err(invalid_key("server.public_url", problem));
    let Some((scheme, rest)) = url.split_once("://") else {
        return bad("must be an absolute URL (https://host[:port][/path])");
    };
    if url.contains(['?', '#']) || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must have no query, fragment or whitespace");
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.is_empty() || authority.contains('@') {
        return bad("must name a host, without credentials");
    }
    match scheme {
        "https" => Ok(()),
        "http" if is_loopback_authority(authority) => Ok(()),
        _ => bad("must be https (plain http only on a loopback host)"),
    }
}

/// A client id that is a URL (draft-ietf-oauth-client-id-metadata-document): https, with a
/// path, no fragment, credentials or dot segments.
fn validate_client_metadata_url(url: &str) -> Result<(), StartupError> {
    let bad = |problem: &str| Err(invalid_key("server.client_metadata_url", problem));
    let Some(rest) = url.strip_prefix("https://") else {
        return bad("must be an https URL");
    };
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    if authority.is_empty() || authority.contains('@') || path.is_empty() {
        return bad("must name a host (without credentials) and a path");
    }
    if url.contains('#') || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return bad("must have no fragment or whitespace");
    }
    if path.split('/').any(|segment| segment == "." || segment == "..") {
        return bad("must have no . or .. path segments");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{validate_client_metadata_url, validate_public_url};

    #[test]
    fn client_metadata_urls_are_https_with_a_path() {
        assert!(validate_client_metadata_url("https://mcp.example.com/client-metadata.json").is_ok());
        for bad in [
            "http://mcp.example.com/c.json",
            "https://mcp.example.com",
            "https://mcp.example.com/",
            "https://u@mcp.example.com/c.json",
            "https://mcp.example.com/a/../c.json",
            "https://mcp.example.com/c.json#x",
        ] {
            assert!(validate_client_metadata_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_urls_are_https_or_loopback_http_without_query() {
        for good in
            ["https://mcp.example.com", "https://mcp.example.com/gw", "http://127.0.0.1:8080", "http://localhost:1"]
        {
            assert!(validate_public_url(good).is_ok(), "{good}");
        }
        for bad in [
            "http://mcp.example.com",
            "https://mcp.example.com/?a=1",
            "https://mcp.example.com/#x",
            "https://user@mcp.example.com",
            "mcp.example.com",
            "ftp://mcp.example.com",
            "https:///path",
        ] {
            assert!(validate_public_url(bad).is_err(), "{bad}");
        }
    }
}
