//! Finding a protected upstream's authorization server, as the MCP authorization spec has
//! clients do: its protected resource metadata (RFC 9728) from the URL its 401 names, else
//! the path-inserted well-known URL, else the root one; then the authorization server's
//! metadata (RFC 8414, then OpenID Connect discovery, path-inserted before path-appended).
//! Here are the rules — which URLs, in which order, and what an answer must hold to be used;
//! fetching them is the caller's.
//!
//! Threat model: the upstream and the servers it names may be hostile. A metadata URL named
//! in a challenge is followed only on the upstream's own origin (no fetches steered at other
//! hosts); the resource the metadata claims must be the upstream itself or a parent path of it
//! (else a token for another resource could be asked for and sent here); an authorization
//! server's metadata must name as its issuer the very URL it was discovered from (RFC 8414
//! §3.3: else its endpoints are not used); only servers that offer PKCE `S256` are used; the
//! issuer and every endpoint the gateway sends a user, a code, a secret or a token to are
//! https (plain http only on a loopback host, for development): else a network attacker reads
//! them.

use reqwest::Url;
use serde::Deserialize;

use crate::error::{UpstreamError, cause};

/// RFC 9728 protected resource metadata (the members a client uses).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ResourceMetadata {
    /// The resource identifier: what `resource` (RFC 8707) must name, byte for byte.
    pub resource: String,
    /// Issuer URLs of the authorization servers that grant tokens for it.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes the resource knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 authorization server metadata (the members a client uses).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct ServerMetadata {
    /// The issuer identifier.
    pub issuer: String,
    /// Where the user authorizes.
    pub authorization_endpoint: String,
    /// Where codes and refresh tokens become tokens.
    pub token_endpoint: String,
    /// Dynamic client registration (RFC 7591), if offered.
    #[serde(default)]
    pub registration_endpoint: Option<String>,
    /// Scopes the server knows.
    #[serde(default)]
    pub scopes_supported: Option<Vec<String>>,
    /// PKCE methods; a server that names none offers no PKCE.
    #[serde(default)]
    pub code_challenge_methods_supported: Vec<String>,
    /// How a client may authenticate at the token endpoint.
    #[serde(default)]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// Whether authorization responses carry `iss` (RFC 9207).
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    /// Whether the server takes a Client ID Metadata Document URL as `client_id`.
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    /// Where tokens are revoked (RFC 7009), if offered.
    #[serde(default)]
    pub revocation_endpoint: Option<String>,
}

const RESOURCE_WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";
const SERVER_WELL_KNOWN: &str = "/.well-known/oauth-authorization-server";
const OPENID_WELL_KNOWN: &str = "/.well-known/openid-configuration";

/// Where to look for the protected resource metadata of the upstream at `endpoint`, in order:
/// the URL its challenge named (only on the upstream's own origin), the path-inserted
/// well-known URL (when the endpoint has a path), the root one.
pub fn resource_metadata_urls(endpoint: &Url, named: Option<&str>) -> Vec<Url> {
    let mut urls = Vec::with_capacity(3);
    if let Some(named) = named.and_then(|n| endpoint.join(n).ok()).filter(|u| same_origin(u, endpoint)) {
        urls.push(named);
    }
    let path = endpoint.path().trim_end_matches('/');
    for candidate in
        [(!path.is_empty()).then(|| format!("{RESOURCE_WELL_KNOWN}{path}")), Some(RESOURCE_WELL_KNOWN.to_owned())]
            .into_iter()
            .flatten()
    {
        let url = origin_url(endpoint, &candidate);
        if !urls.contains(&url) {
            urls.push(url);
        }
    }
    urls
}

/// Where to look for the metadata of the authorization server `issuer`, in order: RFC 8414
/// then OpenID Connect, path-inserted; and for an issuer with a path, OpenID's path-appended
/// form last. Never the root form for an issuer with a path (that is another server's).
///
/// # Errors
///
/// `issuer` is not an http(s) URL without query or fragment.
pub fn server_metadata_urls(issuer: &str) -> Result<Vec<Url>, UpstreamError> {
    let url = secure_url(issuer, "issuer")?;
    if url.query().is_some() || url.fragment().is_some() {
        return Err(UpstreamError::authorization(format!("issuer {issuer:?} must be a URL without query or fragment")));
    }
    let path = url.path().trim_end_matches('/');
    let mut candidates = vec![format!("{SERVER_WELL_KNOWN}{path}"), format!("{OPENID_WELL_KNOWN}{path}")];
    if !path.is_empty() {
        candidates.push(format!("{path}{OPENID_WELL_KNOWN}"));
    }
    Ok(candidates.iter().map(|c| origin_url(&url, c)).collect())
}

/// Checks the resource metadata found for the upstream at `endpoint`: the resource it names is
/// the upstream's own origin at the endpoint's path or a parent of it, without fragment, and
/// some authorization server is named.
///
/// # Errors
///
/// What does not hold (then nothing is authorized for this upstream).
pub fn check_resource(metadata: &ResourceMetadata, endpoint: &Url) -> Result<(), UpstreamError> {
    let resource = Url::parse(&metadata.resource).map_err(|e| UpstreamError::Authorization {
        detail: format!("resource {:?} is not a URL", metadata.resource),
        source: Some(cause(e)),
    })?;
    if resource.fragment().is_some() || !same_origin(&resource, endpoint) {
        return Err(UpstreamError::authorization(format!(
            "the metadata names resource {:?}, which is not this upstream ({endpoint})",
            metadata.resource
        )));
    }
    let (theirs, ours) = (resource.path().trim_end_matches('/'), endpoint.path().trim_end_matches('/'));
    if !(ours == theirs || ours.starts_with(&format!("{theirs}/"))) {
        return Err(UpstreamError::authorization(format!(
            "the metadata names resource {:?}, which does not cover this upstream's path {ours:?}",
            metadata.resource
        )));
    }
    if metadata.authorization_servers.is_empty() {
        return Err(UpstreamError::authorization(
            "the protected resource metadata names no authorization server".to_owned(),
        ));
    }
    Ok(())
}

/// The authorization server to use of those `metadata` names: the first; or, where the
/// operator pinned one (`[upstream.oauth] issuer`, required with a client secret), that one
/// — an upstream naming only others is refused before any request goes to them (a hostile
/// upstream could otherwise have the gateway send its secret, and its users, to its own
/// server).
///
/// # Errors
///
/// No server named, or the pinned one not among them.
pub fn pick_issuer(metadata: &ResourceMetadata, pinned: Option<&str>) -> Result<String, UpstreamError> {
    let Some(pinned) = pinned else {
        return metadata.authorization_servers.first().cloned().ok_or_else(|| {
            UpstreamError::authorization("the protected resource metadata names no authorization server".to_owned())
        });
    };
    metadata.authorization_servers.iter().find(|named| same_issuer(named, pinned)).cloned().ok_or_else(|| {
        UpstreamError::authorization(format!(
            "the upstream names authorization server(s) {:?}, not the configured issuer {pinned:?}: none is used",
            metadata.authorization_servers
        ))
    })
}

/// Checks the metadata read for authorization server `issuer`: it names that issuer (the
/// only difference tolerated is a trailing `/` on an issuer without a path), offers PKCE
/// `S256`, and its issuer and its authorization, token and registration endpoints are https
/// (http only on a loopback host).
///
/// # Errors
///
/// What does not hold (then none of its endpoints is used).
pub fn check_server(metadata: &ServerMetadata, issuer: &str) -> Result<(), UpstreamError> {
    if !same_issuer(&metadata.issuer, issuer) {
        return Err(UpstreamError::authorization(format!(
            "the authorization server at {issuer:?} calls itself {:?}: its endpoints are not used",
            metadata.issuer
        )));
    }
    if !metadata.code_challenge_methods_supported.iter().any(|m| m == "S256") {
        return Err(UpstreamError::authorization(format!("authorization server {issuer:?} does not offer PKCE S256")));
    }
    secure_url(&metadata.issuer, "issuer")?;
    secure_url(&metadata.authorization_endpoint, "authorization_endpoint")?;
    secure_url(&metadata.token_endpoint, "token_endpoint")?;
    if let Some(registration) = &metadata.registration_endpoint {
        secure_url(registration, "registration_endpoint")?;
    }
    Ok(())
}

/// `url` parsed, if it is https, or http on a loopback host (`localhost` or a loopback IP: a
/// name that merely resolves to one is not, DNS can be rebound).
///
/// # Errors
///
/// Not a URL, or neither of those: `what` names the member it was read from.
pub fn secure_url(url: &str, what: &str) -> Result<Url, UpstreamError> {
    let parsed = Url::parse(url).map_err(|e| UpstreamError::Authorization {
        detail: format!("{what} {url:?} is not a URL"),
        source: Some(cause(e)),
    })?;
    let loopback = parsed
        .host_str()
        .is_some_and(|h| mcpgate_protocol::authority::is_loopback_host(mcpgate_protocol::authority::host_name(h)));
    match parsed.scheme() {
        "https" if parsed.host_str().is_some() => Ok(parsed),
        "http" if loopback => Ok(parsed),
        _ => Err(UpstreamError::authorization(format!(
            "{what} {url:?} must be https (plain http only on a loopback host)"
        ))),
    }
}

/// Checks the `iss` of an authorization response (RFC 9207) against the server's issuer:
/// required when the server advertises it, and exact whenever present.
///
/// # Errors
///
/// A missing (where advertised) or different `iss`: the code is not redeemed.
pub fn check_response_issuer(metadata: &ServerMetadata, iss: Option<&str>) -> Result<(), UpstreamError> {
    match iss {
        Some(iss) if iss == metadata.issuer => Ok(()),
        Some(iss) => Err(UpstreamError::authorization(format!(
            "the authorization response names issuer {iss:?}, not {:?}",
            metadata.issuer
        ))),
        None if metadata.authorization_response_iss_parameter_supported => Err(UpstreamError::authorization(
            "the authorization response lacks the iss its server advertises".to_owned(),
        )),
        None => Ok(()),
    }
}

/// The scopes to ask for: those the challenge named, else every scope the resource lists, else
/// none; with `offline_access` added when the authorization server lists it (so a refresh token
/// comes); on a step-up, together with the scopes `held` already.
pub fn scopes_to_request(
    challenge: Option<&str>,
    resource: &ResourceMetadata,
    server: &ServerMetadata,
    held: Option<&str>,
) -> Option<String> {
    let mut scopes: Vec<&str> = match challenge.filter(|c| !c.trim().is_empty()) {
        Some(named) => named.split_whitespace().collect(),
        None => resource.scopes_supported.iter().flatten().map(String::as_str).collect(),
    };
    for scope in held.into_iter().flat_map(str::split_whitespace) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    let offline = server.scopes_supported.iter().flatten().any(|s| s == "offline_access");
    if offline && !scopes.contains(&"offline_access") && !scopes.is_empty() {
        scopes.push("offline_access");
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

fn same_issuer(claimed: &str, expected: &str) -> bool {
    if claimed == expected {
        return true;
    }
    let path_less = |s: &str| Url::parse(s).is_ok_and(|u| u.path() == "/" || u.path().is_empty());
    claimed.trim_end_matches('/') == expected.trim_end_matches('/') && path_less(claimed) && path_less(expected)
}

fn same_origin(a: &Url, b: &Url) -> bool {
    a.scheme() == b.scheme() && a.host_str() == b.host_str() && a.port_or_known_default() == b.port_or_known_default()
}

/// `path` on `base`'s origin (no query, no fragment).
fn origin_url(base: &Url, path: &str) -> Url {
    let mut url = base.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> Url {
        Url::parse(s).expect("a URL")
    }

    fn strings(urls: &[Url]) -> Vec<&str> {
        urls.iter().map(Url::as_str).collect()
    }

    fn server(issuer: &str) -> ServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": issuer, "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"), "code_challenge_methods_supported": ["S256"],
        }))
        .expect("metadata")
    }

    fn resource(resource: &str, scopes: Option<&[&str]>) -> ResourceMetadata {
        ResourceMetadata {
            resource: resource.to_owned(),
            authorization_servers: vec!["https://as.example".to_owned()],
            scopes_supported: scopes.map(|s| s.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn resource_metadata_is_looked_for_where_the_spec_says_in_its_order() {
        let endpoint = url("https://mcp.example/mcp");
        let named = "https://mcp.example/custom/metadata/location.json";
        assert_eq!(
            strings(&resource_metadata_urls(&endpoint, Some(named))),
            [
                named,
                "https://mcp.example/.well-known/oauth-protected-resource/mcp",
                "https://mcp.example/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            strings(&resource_metadata_urls(&url("https://mcp.example/"), None)),
            ["https://mcp.example/.well-known/oauth-protected-resource"]
        );
        // A challenge may not steer the gateway to another host.
        let elsewhere = resource_metadata_urls(&endpoint, Some("https://internal.example/secrets"));
        assert_eq!(elsewhere.len(), 2, "{elsewhere:?}");
        let relative = resource_metadata_urls(&endpoint, Some("/.well-known/oauth-protected-resource/mcp"));
        assert_eq!(relative.len(), 2, "a relative name joins the endpoint and is not repeated: {relative:?}");
    }

    #[test]
    fn server_metadata_urls_insert_before_they_append_and_never_fall_back_to_the_root() {
        assert_eq!(
            strings(&server_metadata_urls("https://as.example").expect("issuer")),
            [
                "https://as.example/.well-known/oauth-authorization-server",
                "https://as.example/.well-known/openid-configuration"
            ]
        );
        assert_eq!(
            strings(&server_metadata_urls("https://as.example/tenant1").expect("issuer")),
            [
                "https://as.example/.well-known/oauth-authorization-server/tenant1",
                "https://as.example/.well-known/openid-configuration/tenant1",
                "https://as.example/tenant1/.well-known/openid-configuration"
            ]
        );
        assert!(server_metadata_urls("ftp://as.example").is_err());
        assert!(server_metadata_urls("http://as.example").is_err(), "plain http off loopback");
        assert!(server_metadata_urls("http://127.0.0.1:4000").is_ok() && server_metadata_urls("http://[::1]").is_ok());
        assert!(server_metadata_urls("https://as.example/?tenant=1").is_err());
        assert!(server_metadata_urls("not a url").is_err());
    }

    #[test]
    fn a_resource_must_be_this_upstream_or_a_parent_path_of_it() {
        let endpoint = url("https://mcp.example/mcp");
        assert!(check_resource(&resource("https://mcp.example/mcp", None), &endpoint).is_ok());
        assert!(check_resource(&resource("https://mcp.example", None), &endpoint).is_ok(), "the root PRM's resource");
        assert!(check_resource(&resource("https://evil.example/mcp", None), &endpoint).is_err());
        assert!(check_resource(&resource("https://mcp.example/mcp2", None), &endpoint).is_err());
        assert!(check_resource(&resource("https://mcp.example/other", None), &endpoint).is_err());
        assert!(check_resource(&resource("https://mcp.example/mcp#x", None), &endpoint).is_err());
        assert!(check_resource(&resource("http://mcp.example/mcp", None), &endpoint).is_err(), "another scheme");
        let mut none = resource("https://mcp.example/mcp", None);
        none.authorization_servers.clear();
        assert!(check_resource(&none, &endpoint).is_err());
    }

    #[test]
    fn a_server_must_name_its_own_issuer_and_offer_s256() {
        assert!(check_server(&server("https://as.example"), "https://as.example").is_ok());
        assert!(check_server(&server("https://as.example/"), "https://as.example").is_ok(), "a path-less issuer's /");
        assert!(check_server(&server("https://attacker.example"), "https://as.example").is_err());
        assert!(check_server(&server("https://as.example/tenant1/"), "https://as.example/tenant1").is_err());
        let mut plain = server("https://as.example");
        plain.code_challenge_methods_supported = vec!["plain".to_owned()];
        assert!(check_server(&plain, "https://as.example").is_err());
        plain.code_challenge_methods_supported.clear();
        assert!(check_server(&plain, "https://as.example").is_err(), "no PKCE named: none offered");
    }

    #[test]
    fn a_pinned_issuer_must_be_among_those_the_upstream_names() {
        let mut r = resource("https://mcp.example/mcp", None);
        assert_eq!(pick_issuer(&r, None).expect("the first"), "https://as.example");
        assert_eq!(pick_issuer(&r, Some("https://as.example")).expect("pinned"), "https://as.example");
        assert_eq!(pick_issuer(&r, Some("https://as.example/")).expect("a path-less /"), "https://as.example");
        let e = pick_issuer(&r, Some("https://login.example")).expect_err("another server").to_string();
        assert!(e.contains("https://login.example"), "{e}");
        r.authorization_servers = vec!["https://attacker.example".to_owned(), "https://login.example".to_owned()];
        assert_eq!(pick_issuer(&r, Some("https://login.example")).expect("not the first"), "https://login.example");
        assert!(pick_issuer(&r, Some("https://login.example/tenant")).is_err(), "a path is exact");
        r.authorization_servers.clear();
        assert!(pick_issuer(&r, None).is_err() && pick_issuer(&r, Some("https://login.example")).is_err());
    }

    #[test]
    fn the_issuer_and_every_endpoint_are_https_or_loopback_http() {
        assert!(check_server(&server("http://127.0.0.1:4000"), "http://127.0.0.1:4000").is_ok(), "loopback");
        assert!(check_server(&server("http://localhost:4000"), "http://localhost:4000").is_ok(), "loopback");
        assert!(check_server(&server("http://as.example"), "http://as.example").is_err(), "a plain http issuer");
        let with = |issuer: &str, member: &str, url: &str| {
            let mut s = server(issuer);
            match member {
                "authorization_endpoint" => s.authorization_endpoint = url.to_owned(),
                "token_endpoint" => s.token_endpoint = url.to_owned(),
                _ => s.registration_endpoint = Some(url.to_owned()),
            }
            s
        };
        for member in ["authorization_endpoint", "token_endpoint", "registration_endpoint"] {
            let s = with("https://as.example", member, "http://as.example/endpoint");
            let e = check_server(&s, "https://as.example").expect_err(member).to_string();
            assert!(e.contains(member), "{member}: {e}");
            let s = with("http://127.0.0.1:4000", member, "http://localhost.evil.example/endpoint");
            assert!(check_server(&s, "http://127.0.0.1:4000").is_err(), "{member}: a name is not loopback");
            assert!(
                check_server(&with("https://as.example", member, "https://as.example/x"), "https://as.example").is_ok()
            );
        }
        assert!(secure_url("https://as.example/token", "t").is_ok());
        assert!(secure_url("http://127.0.0.2/token", "t").is_ok() && secure_url("http://[::1]:8/t", "t").is_ok());
        assert!(secure_url("ftp://as.example", "t").is_err() && secure_url("/token", "t").is_err());
    }

    #[test]
    fn the_response_issuer_is_exact_and_required_where_advertised() {
        let mut s = server("https://as.example");
        assert!(check_response_issuer(&s, None).is_ok());
        assert!(check_response_issuer(&s, Some("https://as.example")).is_ok());
        assert!(check_response_issuer(&s, Some("https://as.example/")).is_err(), "normalized is not equal");
        assert!(check_response_issuer(&s, Some("https://evil.example")).is_err(), "unexpected and wrong");
        s.authorization_response_iss_parameter_supported = true;
        assert!(check_response_issuer(&s, None).is_err());
    }

    #[test]
    fn scopes_come_from_the_challenge_else_the_resource_and_offline_access_only_where_offered() {
        let r = resource("https://mcp.example/mcp", Some(&["mcp:basic", "mcp:read"]));
        let mut s = server("https://as.example");
        assert_eq!(scopes_to_request(Some("mcp:write"), &r, &s, None).as_deref(), Some("mcp:write"));
        assert_eq!(scopes_to_request(None, &r, &s, None).as_deref(), Some("mcp:basic mcp:read"));
        assert_eq!(scopes_to_request(None, &resource("https://mcp.example/mcp", None), &s, None), None);
        assert_eq!(
            scopes_to_request(Some("mcp:write"), &r, &s, Some("mcp:basic")).as_deref(),
            Some("mcp:write mcp:basic"),
            "a step-up keeps what was held"
        );
        s.scopes_supported = Some(vec!["mcp:basic".to_owned(), "offline_access".to_owned()]);
        assert_eq!(scopes_to_request(Some("mcp:basic"), &r, &s, None).as_deref(), Some("mcp:basic offline_access"));
    }
}
