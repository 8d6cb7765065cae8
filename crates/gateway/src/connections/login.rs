//! The sign-in that proves who opened a connect link: an OpenID Connect authorization code
//! flow (with PKCE and a nonce) at the gateway's own issuer (`auth.jwt.issuer`, whose tokens
//! name the gateway's callers), as the client `[auth.browser_login]` names.
//!
//! Invariant: a link goes on to the upstream's authorization server only when the ID token
//! the issuer's token endpoint returned is valid — signed by the issuer (its JWKS, or the
//! client secret for HMAC), for this client, unexpired, with this flow's nonce — and names the
//! very `iss` and `sub` of the principal the link was made for. Otherwise the user sees a
//! refusal and nothing is stored (user B cannot attach B's account to user A); and only in
//! the browser that opened the link (a sign-in's return forwarded to another browser is
//! refused: no login CSRF).

use std::time::Duration;

use axum::http::HeaderMap;
use jsonwebtoken::jwk::JwkSet;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde::{Deserialize, Serialize};

use mcpgate_upstream::oauth::Pkce;

use super::flow::{ConnectLink, Flow, Step};
use super::registration::{authorization_server, authorization_server_caused};
use super::{Connector, LOGIN_CALLBACK_PATH, random_hex};
use crate::config::Config;
use crate::error::{ConnectFailure, GatewayError, StartupError};

/// Most bytes read of an answer of the issuer.
const MAX_ANSWER: usize = 256 * 1024;

/// The gateway as an OpenID Connect client of its own issuer.
pub(crate) struct BrowserLogin {
    issuer: String,
    client_id: String,
    client_secret: Option<String>,
    scopes: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for BrowserLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Reachable from the connector's and the app state's Debug: the secret never shows.
        f.debug_struct("BrowserLogin")
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret.as_ref().map(|_| "<set>"))
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// The issuer's OpenID Connect discovery document (the members used).
#[derive(Deserialize)]
struct Provider {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    #[serde(default)]
    jwks_uri: Option<String>,
}

/// The `state` of a sign-in: the link it is for, the PKCE verifier, the OIDC nonce and the
/// digest of the cookie of the browser that opened the link.
#[derive(Serialize, Deserialize)]
pub(super) struct LoginState {
    link: ConnectLink,
    verifier: String,
    oidc_nonce: String,
    browser: String,
    nonce: String,
}

impl Flow for LoginState {
    fn nonce(&self) -> &str {
        &self.nonce
    }
}

#[derive(Deserialize)]
struct TokenAnswer {
    #[serde(default)]
    id_token: Option<String>,
}

#[derive(Deserialize)]
struct IdClaims {
    iss: String,
    sub: String,
    #[serde(default)]
    nonce: Option<String>,
}

impl BrowserLogin {
    pub(super) fn from_config(config: &Config) -> Result<Self, StartupError> {
        let login = &config.auth.browser_login;
        let (Some(issuer), Some(client_id)) = (config.auth.jwt.issuer.clone(), login.client_id.clone()) else {
            return Err(StartupError::config(
                "auth.browser_login.client_id",
                "required (with auth.jwt.issuer) unless auth.browser_login.verify_user = false",
            ));
        };
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| StartupError::step_caused("building the sign-in HTTP client", "reqwest refused", e))?;
        Ok(Self {
            issuer,
            client_id,
            client_secret: login.client_secret.as_ref().map(|s| s.expose().to_owned()),
            scopes: login.scopes.join(" "),
            http,
        })
    }

    async fn provider(&self) -> Result<Provider, GatewayError> {
        let url = format!("{}/.well-known/openid-configuration", self.issuer.trim_end_matches('/'));
        let body = self.get(&url).await?;
        let provider: Provider = serde_json::from_slice(&body)
            .map_err(|e| issuer_failed_caused(format!("{url}: not a discovery document"), e))?;
        if provider.issuer != self.issuer {
            return Err(issuer_failed(format!("{url} names issuer {:?}", provider.issuer)));
        }
        Ok(provider)
    }

    async fn get(&self, url: &str) -> Result<Vec<u8>, GatewayError> {
        let response = self
            .http
            .get(url)
            .header(ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| issuer_failed_caused(url.to_owned(), e.without_url()))?;
        if !response.status().is_success() {
            return Err(issuer_failed(format!("{url} answered {}", response.status())));
        }
        bounded(response).await
    }

    /// The `iss` and `sub` of the user who signed in with `code`, from an ID token checked
    /// as the module says.
    async fn signed_in(
        &self,
        provider: &Provider,
        code: &str,
        redirect_uri: &str,
        state: &LoginState,
    ) -> Result<IdClaims, GatewayError> {
        let mut form = Url::parse("http://form.invalid/")
            .map_err(|e| GatewayError::internal_caused("the form of a token request", e))?;
        form.query_pairs_mut()
            .append_pair("grant_type", "authorization_code")
            .append_pair("code", code)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_verifier", &state.verifier)
            .append_pair("client_id", &self.client_id);
        let mut request = self
            .http
            .post(&provider.token_endpoint)
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json");
        if let Some(secret) = &self.client_secret {
            request = request.header(AUTHORIZATION, basic(&self.client_id, secret));
        }
        let response = request
            .body(form.query().unwrap_or_default().to_owned())
            .send()
            .await
            .map_err(|e| issuer_failed_caused("the sign-in token endpoint".to_owned(), e.without_url()))?;
        let status = response.status();
        let body = bounded(response).await?;
        if !status.is_success() {
            return Err(GatewayError::connect(
                ConnectFailure::Denied,
                format!("the sign-in token endpoint answered {status}"),
            ));
        }
        // The parser's error is left out: its text may quote the answer (its tokens).
        let answer: TokenAnswer =
            serde_json::from_slice(&body).map_err(|_| issuer_failed("unreadable sign-in token answer".to_owned()))?;
        let id_token = answer.id_token.ok_or_else(|| issuer_failed("the sign-in gave no ID token".to_owned()))?;
        let claims = self.verify(provider, &id_token).await?;
        if claims.nonce.as_deref() != Some(state.oidc_nonce.as_str()) {
            return Err(issuer_failed("the ID token's nonce is not this sign-in's".to_owned()));
        }
        Ok(claims)
    }

    async fn verify(&self, provider: &Provider, id_token: &str) -> Result<IdClaims, GatewayError> {
        let header = jsonwebtoken::decode_header(id_token)
            .map_err(|e| issuer_failed_caused("unreadable ID token".to_owned(), e))?;
        let key = match header.alg {
            Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512 => {
                let secret = self.client_secret.as_deref().ok_or_else(|| {
                    issuer_failed("an HMAC-signed ID token, and the gateway is a public client".to_owned())
                })?;
                DecodingKey::from_secret(secret.as_bytes())
            }
            _ => {
                let url = provider.jwks_uri.as_deref().ok_or_else(|| issuer_failed("no jwks_uri".to_owned()))?;
                let set: JwkSet = serde_json::from_slice(&self.get(url).await?)
                    .map_err(|e| issuer_failed_caused(format!("{url}: not a JWKS"), e))?;
                let jwk = set
                    .keys
                    .iter()
                    .find(|k| header.kid.is_none() || k.common.key_id == header.kid)
                    .ok_or_else(|| issuer_failed("no key of the issuer signed the ID token".to_owned()))?;
                DecodingKey::from_jwk(jwk).map_err(|e| issuer_failed_caused("an unusable key".to_owned(), e))?
            }
        };
        let mut validation = Validation::new(header.alg);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.client_id]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.leeway = 60;
        jsonwebtoken::decode::<IdClaims>(id_token, &key, &validation)
            .map(|data| data.claims)
            .map_err(|e| issuer_failed_caused("the ID token does not verify".to_owned(), e))
    }
}

impl Connector {
    /// Where the user opening `link` (in the browser whose cookie has digest `browser`) signs
    /// in first.
    pub(super) async fn login_url(
        &self,
        login: &BrowserLogin,
        link: ConnectLink,
        browser: String,
    ) -> Result<String, GatewayError> {
        let provider = login.provider().await?;
        let pkce = Pkce::generate().map_err(|e| GatewayError::internal_caused("no PKCE verifier", e))?;
        let state = LoginState {
            link,
            verifier: pkce.verifier.clone(),
            oidc_nonce: random_hex()?,
            browser,
            nonce: random_hex()?,
        };
        let sealed = self.seal_flow(Step::Login, &state)?;
        let mut url = Url::parse(&provider.authorization_endpoint)
            .map_err(|e| issuer_failed_caused("the issuer's authorization endpoint is not a URL".to_owned(), e))?;
        url.query_pairs_mut()
            .append_pair("response_type", "code")
            .append_pair("client_id", &login.client_id)
            .append_pair("redirect_uri", &self.public(LOGIN_CALLBACK_PATH))
            .append_pair("scope", &login.scopes)
            .append_pair("state", &sealed)
            .append_pair("nonce", &state.oidc_nonce)
            .append_pair("code_challenge", &pkce.challenge)
            .append_pair("code_challenge_method", "S256");
        Ok(url.into())
    }

    /// The sign-in came back with `code` for `state` to the browser that sent `headers`: the
    /// link it was for and the browser's digest, once that is the browser that opened the link
    /// and the user who signed in is shown to be the link's principal.
    pub(super) async fn after_login(
        &self,
        code: &str,
        state: &str,
        headers: &HeaderMap,
    ) -> Result<(ConnectLink, String), GatewayError> {
        let login = self.login.as_ref().ok_or_else(|| {
            GatewayError::connect(ConnectFailure::NotFound, "a sign-in callback, and no sign-in is configured")
        })?;
        let state: LoginState = self.open_flow(Step::Login, state).await?;
        // Before the code is redeemed: a forwarded sign-in is not spent on the wrong browser.
        if let Err(e) = self.same_browser(headers, &state.browser) {
            self.stats.attempt(&state.link.upstream, super::stats::Attempt::Refused);
            tracing::warn!(upstream = %state.link.upstream, "a sign-in came back to another browser: refused");
            return Err(e);
        }
        let provider = login.provider().await?;
        let claims = login.signed_in(&provider, code, &self.public(LOGIN_CALLBACK_PATH), &state).await?;
        let (link, browser) = (state.link, state.browser);
        if claims.iss != link.issuer || claims.sub != link.subject {
            self.stats.attempt(&link.upstream, super::stats::Attempt::Refused);
            tracing::warn!(
                upstream = %link.upstream,
                "a connect link was opened by another user than the one it was made for: refused"
            );
            return Err(GatewayError::connect(
                ConnectFailure::WrongUser,
                "the signed-in user is not the link's principal",
            ));
        }
        Ok((link, browser))
    }
}

async fn bounded(mut response: reqwest::Response) -> Result<Vec<u8>, GatewayError> {
    let mut body = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|e| issuer_failed_caused("reading an answer".to_owned(), e.without_url()))?
    {
        if body.len() + chunk.len() > MAX_ANSWER {
            return Err(issuer_failed(format!("an answer larger than {MAX_ANSWER} bytes")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

fn basic(id: &str, secret: &str) -> String {
    use base64::Engine as _;
    // RFC 6749 §2.3.1: both form-urlencoded before joining.
    let enc = |s: &str| {
        Url::parse("http://x.invalid/").map_or_else(
            |_| s.to_owned(),
            |mut u| {
                u.query_pairs_mut().append_pair("v", s);
                u.query().unwrap_or_default().trim_start_matches("v=").to_owned()
            },
        )
    };
    let pair = format!("{}:{}", enc(id), enc(secret));
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
}

fn issuer_failed(detail: String) -> GatewayError {
    authorization_server(format!("sign-in at the gateway's issuer: {detail}"))
}

/// Like [`issuer_failed`], caused by `source` (an HTTP client's error names the URL, never
/// the form it sent: no code or client secret; a JWT library's names what is wrong, never
/// the token).
fn issuer_failed_caused(detail: String, source: impl Into<crate::error::BoxError>) -> GatewayError {
    authorization_server_caused(format!("sign-in at the gateway's issuer: {detail}"), source)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_secret_never_shows_in_debug() {
        let mut config = Config::default();
        config.auth.jwt.issuer = Some("https://id.example".to_owned());
        config.auth.browser_login.client_id = Some("gw".to_owned());
        config.auth.browser_login.client_secret = Some(crate::config::Secret::new("login-s3cret-value"));
        let login = BrowserLogin::from_config(&config).expect("a sign-in client");
        let shown = format!("{login:?}");
        assert!(!shown.contains("login-s3cret-value") && shown.contains("<set>") && shown.contains("gw"), "{shown}");
    }
}
