//! A user's way through connecting an upstream, step by step as their browser arrives: the
//! connect link (→ sign-in, or straight on), then the authorization at the upstream's server
//! (discovery from its challenge, the client, PKCE `S256`, RFC 8707 `resource`, sealed
//! `state`), then the callback that redeems the code and stores the tokens.
//!
//! Invariant: tokens are stored only at the end of a flow whose every step opened and was
//! used once, in the browser that opened the link (its cookie, `browser`), for the principal
//! the link was made for (and, with the sign-in, who signed in as them); a code is redeemed
//! only when its response came back to the redirect URI of the very upstream and server the
//! flow was sent to (`redirect`), and carried that server's `iss` (RFC 9207) wherever the
//! server sends it or the redirect URI alone does not name the server.

use axum::http::HeaderMap;
use reqwest::Url;
use serde::{Deserialize, Serialize};

use mcpgate_store::Expect;
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{ClientAuth, Pkce, authorization_url, check_response_issuer, scopes_to_request};

use super::client_source::ClientSource;
use super::flow::{ConnectLink, Flow, Step};
use super::record::Connection;
use super::redirect::callback_path;
use super::registration::authorization_server_caused;
use super::stats::Attempt;
use super::{Connector, random_hex};
use crate::error::{ConnectFailure, GatewayError};
use crate::time::now_ms;

/// The `state` of an authorization at the upstream's server.
#[derive(Serialize, Deserialize)]
pub(super) struct AuthorizeState {
    principal: String,
    upstream: String,
    issuer: String,
    iss_required: bool,
    resource: String,
    token_endpoint: String,
    client_id: String,
    client_auth: String,
    source: ClientSource,
    verifier: String,
    #[serde(default)]
    scope: Option<String>,
    /// The digest of the cookie of the browser that opened the link.
    browser: String,
    nonce: String,
}

impl Flow for AuthorizeState {
    fn nonce(&self) -> &str {
        &self.nonce
    }
}

/// What the upstream's authorization server sends back to the callback.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct CallbackParams {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    iss: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

impl Connector {
    /// The browser that sent `headers` opened connect link `sealed`: where to send it (the
    /// sign-in, or the upstream's authorization server), and the `Set-Cookie` that binds the
    /// flow to it.
    pub(crate) async fn open_link(&self, sealed: &str, headers: &HeaderMap) -> Result<(String, String), GatewayError> {
        let link: ConnectLink = self.open_flow(Step::Link, sealed).await?;
        if !self.knows(&link.upstream) {
            return Err(GatewayError::connect(
                ConnectFailure::NotFound,
                format!("a link for upstream {:?}, which is not an oauth upstream here", link.upstream),
            ));
        }
        self.stats.attempt(&link.upstream, Attempt::Started);
        let browser = self.browser_opening(headers)?;
        let url = match &self.login {
            Some(login) => self.login_url(login, link, browser.digest()).await?,
            None => self.authorize_url(&link, browser.digest()).await?,
        };
        Ok((url, self.set_cookie(&browser)))
    }

    /// The sign-in came back to the browser that sent `headers`: on to the upstream's
    /// authorization server if it is the browser that opened the link and the link's user
    /// signed in.
    pub(crate) async fn login_callback(
        &self,
        code: &str,
        state: &str,
        headers: &HeaderMap,
    ) -> Result<String, GatewayError> {
        let (link, browser) = self.after_login(code, state, headers).await?;
        self.authorize_url(&link, browser).await
    }

    /// The URL of the authorization at `link`'s upstream's server, for the browser whose
    /// cookie has digest `browser`.
    async fn authorize_url(&self, link: &ConnectLink, browser: String) -> Result<String, GatewayError> {
        let upstream = self.upstreams.get(&link.upstream).ok_or_else(|| {
            GatewayError::connect(ConnectFailure::NotFound, format!("no oauth upstream {:?}", link.upstream))
        })?;
        let endpoint = upstream
            .config
            .url
            .as_deref()
            .and_then(|u| Url::parse(u).ok())
            .ok_or_else(|| GatewayError::internal(format!("oauth upstream {} has no URL", link.upstream)))?;
        let span = tracing::info_span!("oauth_discovery", upstream = %link.upstream);
        let discovered = tracing::Instrument::instrument(
            async {
                let challenge = upstream.oauth.challenge(&endpoint).await?;
                upstream.oauth.discover(&endpoint, challenge.as_ref()).await.map(|d| (challenge, d))
            },
            span,
        )
        .await
        .map_err(|e| authorization_server_caused(format!("discovery for {}", link.upstream), e))?;
        let (challenge, discovered) = discovered;
        let (client, source) = self.client_for(upstream, &discovered.server).await?;
        let configured = upstream.config.oauth().scopes;
        let scope = if configured.is_empty() {
            scopes_to_request(
                challenge.as_ref().and_then(|c| c.scope.as_deref()),
                &discovered.resource,
                &discovered.server,
                link.scopes.as_deref(),
            )
        } else {
            let mut scopes = configured;
            for extra in link.scopes.iter().flat_map(|s| s.split_whitespace()) {
                if !scopes.iter().any(|s| s == extra) {
                    scopes.push(extra.to_owned());
                }
            }
            Some(scopes.join(" "))
        };
        let pkce = Pkce::generate().map_err(|e| GatewayError::internal_caused("no PKCE verifier", e))?;
        // A redirect URI that does not name this one server (`redirect`) leaves only `iss` to
        // tell its answers from another's (`client_for` picks such a client only where the
        // server advertises it).
        let one_server = match source {
            ClientSource::Registered => true,
            ClientSource::Configured => upstream.config.oauth().issuer.is_some(),
            ClientSource::Metadata => false,
        };
        let redirect_uri = self.public(&callback_path(&link.upstream, source, &discovered.server.issuer));
        let state = AuthorizeState {
            principal: link.principal.clone(),
            upstream: link.upstream.clone(),
            issuer: discovered.server.issuer.clone(),
            iss_required: discovered.server.authorization_response_iss_parameter_supported || !one_server,
            resource: discovered.resource.resource.clone(),
            token_endpoint: discovered.server.token_endpoint.clone(),
            client_id: client.client_id.clone(),
            client_auth: client.auth.as_str().to_owned(),
            source,
            verifier: pkce.verifier.clone(),
            scope: scope.clone(),
            browser,
            nonce: random_hex()?,
        };
        let sealed = self.seal_flow(Step::Authorize, &state)?;
        let url = authorization_url(
            &discovered.server,
            &client.client_id,
            &redirect_uri,
            &pkce,
            &sealed,
            scope.as_deref(),
            &discovered.resource.resource,
        )
        .map_err(|e| authorization_server_caused("the authorization URL".to_owned(), e))?;
        Ok(url.into())
    }

    /// The upstream's authorization server sent the user back to `path` (their browser sent
    /// `headers`): redeem the code and store the user's connection if `path` is the redirect
    /// URI the flow was sent with. Returns the upstream's name.
    pub(crate) async fn callback(
        &self,
        path: &str,
        params: CallbackParams,
        headers: &HeaderMap,
    ) -> Result<String, GatewayError> {
        let sealed = params
            .state
            .as_deref()
            .ok_or_else(|| GatewayError::connect(ConnectFailure::InvalidLink, "a callback without state"))?;
        let state: AuthorizeState = self.open_flow(Step::Authorize, sealed).await?;
        let refused = |failure: ConnectFailure, detail: String, source: Option<UpstreamError>| {
            self.stats.attempt(&state.upstream, Attempt::Refused);
            match source {
                Some(source) => GatewayError::connect_caused(failure, detail, source),
                None => GatewayError::connect(failure, detail),
            }
        };
        if let Err(e) = self.same_browser(headers, &state.browser) {
            self.stats.attempt(&state.upstream, Attempt::Refused);
            tracing::warn!(upstream = %state.upstream, "an authorization came back to another browser: refused");
            return Err(e);
        }
        // Before anything of the response is used: a response at another flow's redirect URI
        // is another server's (a mix-up), whatever its state says.
        let expected = callback_path(&state.upstream, state.source, &state.issuer);
        if path != expected {
            tracing::warn!(
                upstream = %state.upstream,
                issuer = %state.issuer,
                "an authorization came back to another upstream's or server's redirect URI (a mix-up?): refused, \
                 its code not redeemed"
            );
            return Err(refused(
                ConnectFailure::WrongServer,
                format!("the response came back to {path:?}, not to the flow's redirect URI {expected:?}"),
                None,
            ));
        }
        if let Some(error) = params.error {
            let error = mcpgate_protocol::quote::clip(&error, 64);
            return Err(refused(ConnectFailure::Denied, format!("the authorization server answered {error}"), None));
        }
        let upstream = self.upstreams.get(&state.upstream).ok_or_else(|| {
            GatewayError::connect(ConnectFailure::NotFound, format!("no oauth upstream {:?}", state.upstream))
        })?;
        let mut server = Connection::server_named(&state.issuer, &state.token_endpoint);
        server.authorization_response_iss_parameter_supported = state.iss_required;
        check_response_issuer(&server, params.iss.as_deref())
            .map_err(|e| refused(ConnectFailure::Denied, "RFC 9207".to_owned(), Some(e)))?;
        let code =
            params.code.ok_or_else(|| refused(ConnectFailure::Denied, "a callback without code".to_owned(), None))?;
        let auth = ClientAuth::parse(&state.client_auth).unwrap_or(ClientAuth::None);
        let client = self.client_again(upstream, &state.issuer, &state.client_id, auth, state.source).await?;
        let pkce = Pkce::from_verifier(state.verifier.clone());
        let span = tracing::info_span!("oauth_redeem", upstream = %state.upstream, issuer = %state.issuer);
        let tokens = tracing::Instrument::instrument(
            upstream.oauth.redeem(&server, &client, &code, &self.public(&expected), &pkce, &state.resource),
            span,
        )
        .await
        .map_err(|e| refused(ConnectFailure::AuthorizationServer, "redeeming the code".to_owned(), Some(e)))?;
        let now = now_ms();
        let connection = Connection {
            access_token: tokens.access_token,
            refresh_token: tokens.refresh_token,
            expires_at_ms: tokens.expires_in.map(|s| now.saturating_add(s.saturating_mul(1000))),
            issued_at_ms: now,
            scope: tokens.scope.or(state.scope),
            issuer: state.issuer,
            resource: state.resource,
            token_endpoint: state.token_endpoint,
            client_id: client.client_id,
            client_secret: client.client_secret,
            client_auth: client.auth.as_str().to_owned(),
        };
        self.save(&state.principal, &state.upstream, &connection, now, Expect::Any).await?;
        self.stats.attempt(&state.upstream, Attempt::Completed);
        tracing::info!(upstream = %state.upstream, "a user connected their account");
        Ok(state.upstream)
    }
}
