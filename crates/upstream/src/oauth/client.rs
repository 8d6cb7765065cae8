//! The HTTP side of being an OAuth client of protected upstreams: reading an upstream's
//! challenge, discovering its authorization server (the rules are `discovery`'s), registering
//! the gateway as a client (RFC 7591), the authorization URL a user opens, and redeeming codes
//! and refresh tokens at the token endpoint (revoking them is `revocation`'s).
//!
//! Threat model: every server here may be hostile. Redirects are never followed (a metadata or
//! token request could otherwise be steered elsewhere, with its secrets); every request to an
//! authorization server (metadata, registration, token) reaches only an address its
//! [`AddressPolicy`] allows, checked on the address connected to (`address`), so an upstream
//! cannot aim the gateway at its own network; every answer is bounded in size and time; errors
//! name what failed, never a code, verifier, secret or token.

use std::fmt;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use serde::Deserialize;
use serde_json::json;

use super::address::{AddressPolicy, GuardedResolver};
use super::challenge::BearerChallenge;
use super::discovery::{
    ResourceMetadata, ServerMetadata, check_resource, check_server, pick_issuer, resource_metadata_urls, secure_url,
    server_metadata_urls,
};
use super::endpoint::{answer, basic_authorization, form_body};
use super::pkce::Pkce;
use super::tokens::{self, TokenSet};
use crate::error::{UpstreamError, unlocated};
use crate::tls::install_tls_provider;

/// Most bytes read of a metadata document or registration answer.
const MAX_DOCUMENT: usize = 64 * 1024;

/// What discovery found for a protected upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// Its protected resource metadata (`resource` is what RFC 8707's `resource` names).
    pub resource: ResourceMetadata,
    /// The authorization server used (the first the metadata names).
    pub issuer: String,
    /// That server's metadata, checked.
    pub server: ServerMetadata,
}

/// How the gateway authenticates at a token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// A public client: `client_id` in the body only.
    None,
    /// `client_secret_basic`.
    Basic,
    /// `client_secret_post`.
    Post,
}

impl ClientAuth {
    /// The method named by its RFC 7591 name (`none`, `client_secret_basic`,
    /// `client_secret_post`), if the gateway does it.
    pub fn parse(method: &str) -> Option<Self> {
        match method {
            "none" => Some(Self::None),
            "client_secret_basic" => Some(Self::Basic),
            "client_secret_post" => Some(Self::Post),
            _ => None,
        }
    }

    /// Its RFC 7591 name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Basic => "client_secret_basic",
            Self::Post => "client_secret_post",
        }
    }
}

/// The gateway as a client of one authorization server.
#[derive(Clone, PartialEq, Eq)]
pub struct ClientRegistration {
    /// `client_id`.
    pub client_id: String,
    /// `client_secret`, for a confidential client.
    pub client_secret: Option<String>,
    /// How it authenticates at the token endpoint.
    pub auth: ClientAuth,
}

impl fmt::Debug for ClientRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientRegistration")
            .field("client_id", &self.client_id)
            .field("auth", &self.auth)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Registered {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// An OAuth client over HTTP, bounded in time per request.
#[derive(Debug, Clone)]
pub struct OAuthClient {
    /// For the upstream's own origin (its challenge and resource metadata: the operator named it).
    pub(super) http: reqwest::Client,
    /// For authorization servers (named by the upstream): resolves through `addresses`.
    pub(super) guarded: reqwest::Client,
    pub(super) addresses: AddressPolicy,
    pub(super) timeout: Duration,
    /// The only authorization server discovery may pick (`[upstream.oauth] issuer`).
    issuer: Option<String>,
}

impl OAuthClient {
    /// A client whose every request ends within `timeout`.
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn new(timeout: Duration) -> Result<Self, UpstreamError> {
        install_tls_provider();
        let http = Self::http_client(timeout, None)?;
        let addresses = AddressPolicy::default();
        let guarded = Self::http_client(timeout, Some(addresses))?;
        Ok(Self { http, guarded, addresses, timeout, issuer: None })
    }

    /// The client, reaching authorization servers only at addresses `addresses` allows
    /// (default: public ones and loopback).
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn guarded_by(mut self, addresses: AddressPolicy) -> Result<Self, UpstreamError> {
        self.guarded = Self::http_client(self.timeout, Some(addresses))?;
        self.addresses = addresses;
        Ok(self)
    }

    fn http_client(timeout: Duration, guard: Option<AddressPolicy>) -> Result<reqwest::Client, UpstreamError> {
        let mut builder =
            reqwest::Client::builder().connect_timeout(timeout).redirect(reqwest::redirect::Policy::none());
        if let Some(policy) = guard {
            builder = builder.dns_resolver(GuardedResolver(policy));
        }
        builder.build().map_err(|e| UpstreamError::Authorization {
            detail: "cannot build an HTTP client".to_owned(),
            source: Some(unlocated(e)),
        })
    }

    /// The client, discovering only authorization server `issuer` (`None`: whichever the
    /// upstream names first).
    #[must_use]
    pub fn pinned_to(mut self, issuer: Option<String>) -> Self {
        self.issuer = issuer;
        self
    }

    /// The `Bearer` challenge the upstream at `endpoint` answers a request without a token
    /// with (`None`: it asked for no token).
    ///
    /// # Errors
    ///
    /// The upstream could not be asked.
    pub async fn challenge(&self, endpoint: &Url) -> Result<Option<BearerChallenge>, UpstreamError> {
        let request = self
            .http
            .post(endpoint.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":0,"method":"ping"}"#)
            .timeout(self.timeout);
        let response = request.send().await.map_err(|e| UpstreamError::Authorization {
            detail: format!("cannot reach {endpoint}"),
            source: Some(unlocated(e)),
        })?;
        if !matches!(response.status().as_u16(), 401 | 403) {
            return Ok(None);
        }
        let values = response.headers().get_all(WWW_AUTHENTICATE).iter().filter_map(|v| v.to_str().ok());
        Ok(Some(BearerChallenge::parse(values).unwrap_or_default()))
    }

    /// Discovers the authorization server of the upstream at `endpoint`, from its `challenge`.
    ///
    /// # Errors
    ///
    /// No metadata found where the spec says to look, or metadata that fails its checks (a
    /// resource that is not this upstream, an issuer that is not the one discovered or not the
    /// pinned one, no PKCE).
    pub async fn discover(
        &self,
        endpoint: &Url,
        challenge: Option<&BearerChallenge>,
    ) -> Result<Discovered, UpstreamError> {
        let named = challenge.and_then(|c| c.resource_metadata.as_deref());
        let mut resource = None;
        for url in resource_metadata_urls(endpoint, named) {
            if let Some(found) = self.document::<ResourceMetadata>(&url, false).await? {
                check_resource(&found, endpoint)?;
                resource = Some(found);
                break;
            }
        }
        let resource = resource
            .ok_or_else(|| UpstreamError::authorization(format!("{endpoint} serves no protected resource metadata")))?;
        let issuer = pick_issuer(&resource, self.issuer.as_deref())?;
        let server = self.server_metadata(&issuer).await?;
        Ok(Discovered { resource, issuer, server })
    }

    /// The metadata of authorization server `issuer` (RFC 8414, then OpenID Connect
    /// discovery), checked as [`check_server`] says.
    ///
    /// # Errors
    ///
    /// None found where the specs say to look, or metadata that fails its checks.
    pub async fn server_metadata(&self, issuer: &str) -> Result<ServerMetadata, UpstreamError> {
        for url in server_metadata_urls(issuer)? {
            if let Some(server) = self.document::<ServerMetadata>(&url, true).await? {
                check_server(&server, issuer)?;
                return Ok(server);
            }
        }
        Err(UpstreamError::authorization(format!("authorization server {issuer:?} serves no metadata")))
    }

    /// Registers the gateway with `server` (RFC 7591) for `redirect_uri`: a public client when
    /// the server takes one, else a confidential one.
    ///
    /// # Errors
    ///
    /// The server offers no registration, refuses, or answers something unusable.
    pub async fn register(
        &self,
        server: &ServerMetadata,
        client_name: &str,
        redirect_uri: &str,
    ) -> Result<ClientRegistration, UpstreamError> {
        let endpoint = server.registration_endpoint.as_deref().ok_or_else(|| {
            UpstreamError::authorization(format!("authorization server {:?} offers no registration", server.issuer))
        })?;
        // Metadata not from `discover` (or from before the rule) gets the same check.
        let url = secure_url(endpoint, "registration_endpoint")?;
        self.addresses.check_literal(&url, "the registration endpoint")?;
        let methods = server.token_endpoint_auth_methods_supported.as_deref().unwrap_or_default();
        let wanted = [ClientAuth::None, ClientAuth::Basic, ClientAuth::Post]
            .into_iter()
            .find(|m| methods.is_empty() || methods.iter().any(|s| s == m.as_str()))
            .unwrap_or(ClientAuth::Basic);
        let body = json!({
            "client_name": client_name,
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": wanted.as_str(),
            "application_type": "web",
        });
        let request = self
            .guarded
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .body(body.to_string());
        let (status, body) = answer(request, MAX_DOCUMENT, self.timeout)
            .await
            .map_err(|e| e.into_authorization("the registration endpoint"))?;
        if !(200..300).contains(&status) {
            return Err(UpstreamError::authorization(format!("the registration endpoint answered HTTP {status}")));
        }
        let registered: Registered = serde_json::from_slice(&body).map_err(|e| {
            UpstreamError::authorization(format!("unreadable registration (line {}, column {})", e.line(), e.column()))
        })?;
        let auth =
            registered.token_endpoint_auth_method.as_deref().map_or(Some(wanted), ClientAuth::parse).ok_or_else(
                || {
                    UpstreamError::authorization(
                        "the registration names a token endpoint authentication the gateway does not do".to_owned(),
                    )
                },
            )?;
        if auth != ClientAuth::None && registered.client_secret.is_none() {
            return Err(UpstreamError::authorization(
                "a confidential client was registered without a secret".to_owned(),
            ));
        }
        Ok(ClientRegistration { client_id: registered.client_id, client_secret: registered.client_secret, auth })
    }

    /// Redeems an authorization `code` (with its PKCE verifier) for tokens of `resource`.
    ///
    /// # Errors
    ///
    /// The server refuses (`invalid_grant`: a spent or foreign code) or answers unusably.
    pub async fn redeem(
        &self,
        server: &ServerMetadata,
        client: &ClientRegistration,
        code: &str,
        redirect_uri: &str,
        pkce: &Pkce,
        resource: &str,
    ) -> Result<TokenSet, UpstreamError> {
        let fields = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("redirect_uri", redirect_uri),
            ("code_verifier", pkce.verifier.as_str()),
            ("resource", resource),
        ];
        self.token_request(server, client, &fields).await
    }

    /// Spends `refresh_token` for new tokens of `resource` (a rotating server also issues a new
    /// refresh token, and the old one is spent: callers make sure only one replica spends it).
    ///
    /// # Errors
    ///
    /// The server refuses (`invalid_grant`: spent, revoked or expired) or answers unusably.
    pub async fn refresh(
        &self,
        server: &ServerMetadata,
        client: &ClientRegistration,
        refresh_token: &str,
        resource: &str,
    ) -> Result<TokenSet, UpstreamError> {
        let fields = [("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("resource", resource)];
        self.token_request(server, client, &fields).await
    }

    async fn token_request(
        &self,
        server: &ServerMetadata,
        client: &ClientRegistration,
        fields: &[(&str, &str)],
    ) -> Result<TokenSet, UpstreamError> {
        // A code, a refresh token or a secret goes there: never in clear off loopback, whatever
        // built `server` (a stored connection's token endpoint is not re-discovered).
        let url = secure_url(&server.token_endpoint, "token_endpoint")?;
        self.addresses.check_literal(&url, "the token endpoint")?;
        let request = self.client_post(url, client, fields);
        let (status, body) = answer(request, MAX_DOCUMENT, self.timeout)
            .await
            .map_err(|e| e.into_authorization("the token endpoint"))?;
        tokens::read(status, &body)
    }

    /// A form POST of `fields` to `url`, authenticated as `client` authenticates at the token
    /// endpoint (RFC 6749 §2.3; RFC 7009 §2.1 has revocation do the same), through the
    /// `guarded` client (an authorization server's address). `url` must have passed
    /// [`secure_url`] and [`AddressPolicy::check_literal`].
    pub(super) fn client_post(
        &self,
        url: Url,
        client: &ClientRegistration,
        fields: &[(&str, &str)],
    ) -> reqwest::RequestBuilder {
        let mut fields = fields.to_vec();
        let secret = client.client_secret.as_deref().unwrap_or_default();
        let mut request = self
            .guarded
            .post(url)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        match client.auth {
            ClientAuth::None => fields.push(("client_id", &client.client_id)),
            ClientAuth::Post => fields.extend([("client_id", client.client_id.as_str()), ("client_secret", secret)]),
            ClientAuth::Basic => {
                request = request.header(AUTHORIZATION, basic_authorization(&client.client_id, secret))
            }
        }
        request.body(form_body(fields))
    }

    /// A metadata document at `url` (an authorization server's: `guarded`): `None` when it is
    /// not there (any non-2xx answer, or not JSON of the expected shape), so the next place
    /// may be tried.
    async fn document<T: for<'de> Deserialize<'de>>(
        &self,
        url: &Url,
        guarded: bool,
    ) -> Result<Option<T>, UpstreamError> {
        let http = if guarded {
            self.addresses.check_literal(url, &format!("authorization server metadata {url}"))?;
            &self.guarded
        } else {
            &self.http
        };
        let request = http.get(url.clone()).header(ACCEPT, "application/json");
        let (status, body) = match answer(request, MAX_DOCUMENT, self.timeout).await {
            Ok(answered) => answered,
            Err(e) => return Err(e.into_authorization(url.as_str())),
        };
        if !(200..300).contains(&status) {
            return Ok(None);
        }
        Ok(serde_json::from_slice(&body).ok())
    }
}

/// The URL a user opens to authorize the gateway (authorization code with PKCE `S256`, the
/// `resource` it is for, and `state` to find the flow again at the callback).
///
/// # Errors
///
/// The server's authorization endpoint is not an https URL (or http on a loopback host).
pub fn authorization_url(
    server: &ServerMetadata,
    client_id: &str,
    redirect_uri: &str,
    pkce: &Pkce,
    state: &str,
    scope: Option<&str>,
    resource: &str,
) -> Result<Url, UpstreamError> {
    let mut url = secure_url(&server.authorization_endpoint, "authorization_endpoint")?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("state", state)
            .append_pair("resource", resource);
        if let Some(scope) = scope {
            query.append_pair("scope", scope);
        }
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Metadata whose endpoints are plain http off loopback (as a stored connection or a
    /// flow's state might name them): nothing is sent there.
    fn plain_http() -> ServerMetadata {
        serde_json::from_value(json!({
            "issuer": "http://as.example", "authorization_endpoint": "http://as.example/authorize",
            "token_endpoint": "http://as.example/token", "registration_endpoint": "http://as.example/register",
            "code_challenge_methods_supported": ["S256"],
        }))
        .expect("metadata")
    }

    #[tokio::test]
    async fn no_code_token_or_secret_goes_to_a_plain_http_endpoint_off_loopback() {
        let oauth = OAuthClient::new(Duration::from_secs(1)).expect("a client");
        let server = plain_http();
        let client = ClientRegistration {
            client_id: "gw".to_owned(),
            client_secret: Some("s".to_owned()),
            auth: ClientAuth::Basic,
        };
        let refused = oauth.refresh(&server, &client, "rt", "https://mcp.example/mcp").await.expect_err("refused");
        assert!(refused.to_string().contains("token_endpoint"), "{refused}");
        let pkce = Pkce::generate().expect("pkce");
        let refused = oauth.redeem(&server, &client, "c", "https://gw.example/cb", &pkce, "r").await.expect_err("no");
        assert!(refused.to_string().contains("token_endpoint"), "{refused}");
        let refused = oauth.register(&server, "mcpgate", "https://gw.example/cb").await.expect_err("refused");
        assert!(refused.to_string().contains("registration_endpoint"), "{refused}");
        let refused = authorization_url(&server, "gw", "https://gw.example/cb", &pkce, "s", None, "r").expect_err("no");
        assert!(refused.to_string().contains("authorization_endpoint"), "{refused}");
    }
}
