//! mcpgate's config for a scenario (the scenario server as its only upstream; for `auth/*`
//! runs JWT auth, the public URL and an `auth = "oauth"` upstream), the names that config gives
//! things, and the caller's token.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

/// The upstream's name in mcpgate's config: its entries are exposed as `up_<name>`.
const UPSTREAM: &str = "up";
pub(super) const PREFIX: &str = "up_";

/// mcpgate's public URL in `auth/*` runs. Never resolved: the user agent sends what is under it
/// to the gateway's loopback address, as the TLS-terminating proxy of a deployment would. https,
/// so that mcpgate offers a Client ID Metadata Document where the authorization server takes one.
pub(super) const PUBLIC_URL: &str = "https://mcpgate.conformance.test";
/// The client_id auth/basic-cimd requires, byte for byte (the suite's `CIMD_CLIENT_METADATA_URL`;
/// its authorization server does not fetch the document).
const SUITE_CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";
/// The caller's JWT: issuer, audience (mcpgate's resource), HS256 secret (≥ 32 bytes), subject.
const JWT_ISSUER: &str = "https://issuer.conformance.test";
const JWT_AUDIENCE: &str = "https://mcpgate.conformance.test/mcp";
const JWT_SECRET: &str = "mcpgate-conformance-client-hs256-secret";
const CALLER: &str = "conformance-user";
/// The stand-in tool an oauth upstream shows a caller who has not connected it.
pub(super) const CONNECT_TOOL: &str = "up_connect";

/// mcpgate's config: the scenario server as its only upstream (Streamable HTTP, era auto).
pub(super) fn upstream_config(url: &str, scenario: &str) -> String {
    // The elicitation scenario's server asks mid-call (2025-11-25 elicitation/create on the
    // call's stream): only a gateway task can carry the question to the client and back.
    let task = if scenario == "elicitation-sep1034-client-defaults" { "task = \"always\"\n" } else { "" };
    // Start-up waits at most 5 s for the upstream's lists, so the run stays within DEADLINE.
    format!(
        "[federation]\nstartup_wait_secs = 5\n\n[[upstream]]\nname = \"{UPSTREAM}\"\ntransport = \"http\"\nurl = {url:?}\n{task}"
    )
}

/// mcpgate's config for an `auth/*` scenario: JWT auth for its callers, the public URL its
/// links and callback live under, and the scenario server as an `auth = "oauth"` upstream
/// (with the suite's pre-registered client where the scenario gives one).
pub(super) fn oauth_config(url: &str, scenario: &str, context: &Value, issuer: Option<&str>) -> String {
    let mut server = format!("[server]\npublic_url = {PUBLIC_URL:?}\n");
    if scenario == "auth/basic-cimd" {
        server.push_str(&format!("client_metadata_url = {SUITE_CIMD_URL:?}\n"));
    }
    let mut upstream =
        format!("[[upstream]]\nname = \"{UPSTREAM}\"\ntransport = \"http\"\nurl = {url:?}\nauth = \"oauth\"\n");
    if let (Some(id), Some(secret)) = (context["client_id"].as_str(), context["client_secret"].as_str()) {
        upstream.push_str(&format!("\n[upstream.oauth]\nclient_id = {id:?}\nclient_secret = {secret:?}\n"));
        if let Some(issuer) = issuer {
            upstream.push_str(&format!("issuer = {issuer:?}\n"));
        }
    }
    format!(
        "{server}\n[auth]\nmode = \"jwt\"\nresource = {JWT_AUDIENCE:?}\nauthorization_servers = [{JWT_ISSUER:?}]\n\n\
         [auth.jwt]\nissuer = {JWT_ISSUER:?}\nalgorithms = [\"HS256\"]\nhs256_secrets = [{JWT_SECRET:?}]\n\n\
         [auth.browser_login]\nverify_user = false\n\n[federation]\nstartup_wait_secs = 5\n\n{upstream}"
    )
}

/// The caller's `Authorization` header value: an HS256 JWT mcpgate accepts, valid ten minutes.
pub(super) fn caller_bearer() -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({"iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "sub": CALLER, "iat": now, "exp": now + 600});
    let token = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(JWT_SECRET.as_bytes()))?;
    Ok(format!("Bearer {token}"))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    #[test]
    fn the_pre_registered_client_and_the_cimd_url_go_where_the_scenario_needs_them() {
        let context = json!({"client_id": "pre-registered-client", "client_secret": "pre-registered-secret"});
        let config =
            oauth_config("http://localhost:1/mcp", "auth/pre-registration", &context, Some("http://localhost:2"));
        assert!(config.contains("[upstream.oauth]\nclient_id = \"pre-registered-client\""), "{config}");
        assert!(config.contains("issuer = \"http://localhost:2\""), "{config}");
        assert!(!config.contains("client_metadata_url"), "{config}");
        let config = oauth_config("http://localhost:1/mcp", "auth/basic-cimd", &Value::Null, None);
        assert!(config.contains(&format!("client_metadata_url = {SUITE_CIMD_URL:?}")), "{config}");
        assert!(!config.contains("[upstream.oauth]"), "{config}");
    }
}
