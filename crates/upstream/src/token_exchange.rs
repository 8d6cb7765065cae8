//! Per-user upstream tokens by OAuth 2.0 Token Exchange (RFC 8693): the caller's bearer token
//! is exchanged at the authorization server's token endpoint for a token meant for one
//! upstream (its `audience` / `resource`), which that upstream's requests carry instead.
//!
//! Threat model: an upstream (or whoever sits on its path) may be compromised; it must never
//! see the caller's token, which would let it act as the caller at the gateway and at every
//! other service accepting that token. So the caller's token goes only to the token endpoint
//! (https, or http on loopback, with the gateway's client credentials), an answer that gives
//! the same token back is refused, and a request that has no caller token fails rather than go
//! out with none. Neither token is ever logged or put in an error: errors name the OAuth error
//! code and the endpoint's description (clipped, the caller's token cut out should the
//! endpoint have echoed it). Not covered: revocation — an exchanged token is reused until
//! shortly before it expires (at most an hour), whatever happens to the caller's grant meanwhile.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderValue};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use mcpgate_runtime::Credential;

use crate::config::{ACCESS_TOKEN_TYPE, TokenExchangeConfig, UpstreamConfig};
use crate::error::{Cause, UpstreamError, cause, unlocated};
use crate::oauth::endpoint::{Unanswered, answer, basic_authorization, form, printable};
use crate::tls::install_tls_provider;
use crate::token_cache::{Key, TokenCache, UpstreamToken, key_of, lifetime};

/// The grant type of a token exchange (RFC 8693 §2.1).
const GRANT_TYPE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// Most bytes read of the token endpoint's answer.
const MAX_ANSWER: usize = 64 * 1024;
/// Longest token accepted from it.
const MAX_TOKEN: usize = 16 * 1024;
/// Longest error description passed on.
const MAX_DESCRIPTION: usize = 200;

/// How an exchange failed, in [`ExchangeStats`] order.
pub const EXCHANGE_FAILURE_KINDS: [&str; 5] = ["refused", "unavailable", "timeout", "invalid", "no_caller_token"];

/// Counters of one upstream's token exchanges (this replica).
#[derive(Debug, Default)]
pub struct ExchangeStats {
    /// Requests made to the token endpoint.
    pub exchanges: AtomicU64,
    /// Requests served from the cache (no exchange).
    pub cache_hits: AtomicU64,
    /// Failures by kind, in [`EXCHANGE_FAILURE_KINDS`] order.
    failures: [AtomicU64; EXCHANGE_FAILURE_KINDS.len()],
}

impl ExchangeStats {
    fn failed(&self, kind: Failure) {
        self.failures[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// Failures by kind.
    pub fn failures(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        EXCHANGE_FAILURE_KINDS.iter().zip(&self.failures).map(|(k, v)| (*k, v.load(Ordering::Relaxed)))
    }
}

/// A failure's kind (the index of its counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Failure {
    /// An OAuth error answer.
    Refused = 0,
    /// No connection, a 5xx, or an error answer that is not OAuth's.
    Unavailable = 1,
    /// No answer within the timeout.
    Timeout = 2,
    /// A success answer that cannot be used.
    Invalid = 3,
    /// Nothing to exchange.
    NoCallerToken = 4,
}

/// One upstream's token exchange: the endpoint, the client credentials, the cache.
pub(crate) struct TokenExchanger {
    upstream: String,
    client: reqwest::Client,
    url: reqwest::Url,
    /// `Basic base64(client_id:client_secret)`, marked sensitive.
    basic: HeaderValue,
    /// The form's fields after `subject_token`, encoded once.
    form_tail: String,
    requested_token_type: String,
    timeout: Duration,
    cache: Mutex<TokenCache>,
    /// One lock per caller token being exchanged: concurrent requests of one caller wait for
    /// the first one's exchange and take its token from the cache, or its error (so a dead
    /// endpoint costs the waiters one timeout, not one each).
    flights: Mutex<HashMap<Key, Arc<FlightLock>>>,
    stats: ExchangeStats,
}

impl std::fmt::Debug for TokenExchanger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenExchanger").field("upstream", &self.upstream).finish_non_exhaustive()
    }
}

/// The exchange of one caller token under way: its failure, once it failed.
type FlightLock = tokio::sync::Mutex<Option<UpstreamError>>;

/// Joining the exchange of one caller token; leaves the flight map tidy when dropped.
struct Flight<'a> {
    exchanger: &'a TokenExchanger,
    key: Key,
    lock: Arc<FlightLock>,
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        let mut flights = self.exchanger.flights.lock().unwrap_or_else(PoisonError::into_inner);
        // Clones are taken only under the map's lock: two (the map's and ours) means nobody
        // else waits on this key.
        if Arc::strong_count(&self.lock) == 2 {
            flights.remove(&self.key);
        }
    }
}

impl TokenExchanger {
    /// The exchanger of `upstream`'s `[upstream.token_exchange]`, if it has one.
    pub(crate) fn for_upstream(upstream: &UpstreamConfig) -> Result<Option<Self>, UpstreamError> {
        let Some(config) = &upstream.token_exchange else { return Ok(None) };
        let bad = |key: &str, problem: String| UpstreamError::Config {
            upstream: upstream.name.clone(),
            key: format!("token_exchange.{key}"),
            problem,
            source: None,
        };
        let caused = |key: &str, problem: &str, source: Cause| UpstreamError::Config {
            upstream: upstream.name.clone(),
            key: format!("token_exchange.{key}"),
            problem: problem.to_owned(),
            source: Some(source),
        };
        install_tls_provider();
        let url = reqwest::Url::parse(&config.token_url).map_err(|e| caused("token_url", "not a URL", cause(e)))?;
        let timeout = config.timeout(upstream.timeout_secs);
        let client = reqwest::Client::builder()
            .connect_timeout(upstream.connect_timeout().min(timeout))
            .pool_idle_timeout(Duration::from_secs(60))
            // A redirect could carry the caller's token somewhere else.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| caused("token_url", "cannot build an HTTP client", unlocated(e)))?;
        let mut basic = HeaderValue::try_from(basic_authorization(&config.client_id, &config.client_secret))
            .map_err(|_| bad("client_id", "not usable in an Authorization header".to_owned()))?;
        basic.set_sensitive(true);
        Ok(Some(Self {
            upstream: upstream.name.clone(),
            client,
            url,
            basic,
            form_tail: form_tail(config),
            requested_token_type: config.requested_token_type.clone(),
            timeout,
            cache: Mutex::new(TokenCache::new(usize::try_from(config.cache_max_entries).unwrap_or(usize::MAX))),
            flights: Mutex::new(HashMap::new()),
            stats: ExchangeStats::default(),
        }))
    }

    /// Its counters.
    pub(crate) fn stats(&self) -> &ExchangeStats {
        &self.stats
    }

    /// The upstream's token for the caller who presented `subject`: from the cache, or
    /// exchanged now (one exchange at a time per caller token).
    pub(crate) async fn token(&self, subject: Option<&Credential>) -> Result<UpstreamToken, UpstreamError> {
        let Some(subject) = subject else {
            self.stats.failed(Failure::NoCallerToken);
            return Err(UpstreamError::NoCallerToken);
        };
        let key = key_of(subject.expose());
        if let Some(token) = self.cached(&key) {
            return Ok(token);
        }
        let flight = self.join(key);
        let mut turn = flight.lock.lock().await;
        // Whoever went first may have stored it meanwhile, or failed.
        if let Some(token) = self.cached(&key) {
            return Ok(token);
        }
        if let Some(failure) = &*turn {
            return Err(failure.clone());
        }
        let (token, keep) = self.exchange(subject.expose()).await.map_err(|(kind, e)| {
            self.stats.failed(kind);
            tracing::info!(upstream = %self.upstream, error = &e as &dyn std::error::Error, "token exchange failed");
            *turn = Some(e.clone());
            e
        })?;
        if !keep.is_zero() {
            let now = Instant::now();
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            cache.insert(key, token.clone(), now + keep, now);
        }
        Ok(token)
    }

    fn cached(&self, key: &Key) -> Option<UpstreamToken> {
        let token = self.cache.lock().unwrap_or_else(PoisonError::into_inner).get(key, Instant::now())?;
        self.stats.cache_hits.fetch_add(1, Ordering::Relaxed);
        Some(token)
    }

    fn join(&self, key: Key) -> Flight<'_> {
        let mut flights = self.flights.lock().unwrap_or_else(PoisonError::into_inner);
        let lock = flights.entry(key).or_default().clone();
        Flight { exchanger: self, key, lock }
    }

    /// One request to the token endpoint; the token and how long it may be kept.
    async fn exchange(&self, subject: &str) -> Result<(UpstreamToken, Duration), (Failure, UpstreamError)> {
        self.stats.exchanges.fetch_add(1, Ordering::Relaxed);
        let body = format!("grant_type={}&subject_token={}{}", form(GRANT_TYPE), form(subject), self.form_tail);
        let request = self
            .client
            .post(self.url.clone())
            .header(AUTHORIZATION, self.basic.clone())
            .header(CONTENT_TYPE, "application/x-www-form-urlencoded")
            .header(ACCEPT, "application/json")
            .body(body);
        let (status, body) = answer(request, MAX_ANSWER, self.timeout).await.map_err(|e| {
            let kind = match e {
                Unanswered::Unavailable(_) => Failure::Unavailable,
                Unanswered::TooLarge(_) => Failure::Invalid,
                Unanswered::Timeout(_) => Failure::Timeout,
            };
            let (detail, source) = e.explain("the token endpoint");
            (kind, UpstreamError::TokenExchangeFailed { detail, source })
        })?;
        read_answer(status, &body, subject, &self.requested_token_type)
    }
}

/// The request's fields after `subject_token` (the same for every exchange of an upstream).
fn form_tail(config: &TokenExchangeConfig) -> String {
    let mut tail = format!(
        "&subject_token_type={}&requested_token_type={}",
        form(&config.subject_token_type),
        form(&config.requested_token_type)
    );
    for (field, value) in [("audience", &config.audience), ("resource", &config.resource), ("scope", &config.scope)] {
        if let Some(value) = value {
            tail.push_str(&format!("&{field}={}", form(value)));
        }
    }
    tail
}

/// A success answer (RFC 8693 §2.2.1).
#[derive(Deserialize)]
struct Issued {
    access_token: String,
    #[serde(default)]
    issued_token_type: Option<String>,
    token_type: String,
    #[serde(default)]
    expires_in: Option<Value>,
}

/// An error answer (RFC 6749 §5.2).
#[derive(Deserialize)]
struct Refusal {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// What the token endpoint answered: the token and how long it may be kept, or why not.
fn read_answer(
    status: u16,
    body: &[u8],
    subject: &str,
    requested_token_type: &str,
) -> Result<(UpstreamToken, Duration), (Failure, UpstreamError)> {
    let failed = |kind, detail: String| Err((kind, UpstreamError::TokenExchangeFailed { detail, source: None }));
    if !(200..300).contains(&status) {
        return match serde_json::from_slice::<Refusal>(body) {
            Ok(refusal) if (400..500).contains(&status) => Err((
                Failure::Refused,
                UpstreamError::TokenExchangeRefused {
                    error: clean(&refusal.error, subject, 64),
                    description: refusal.error_description.map(|d| clean(&d, subject, MAX_DESCRIPTION)),
                },
            )),
            _ => failed(Failure::Unavailable, format!("the token endpoint answered HTTP {status}")),
        };
    }
    let issued = match serde_json::from_slice::<Issued>(body) {
        Ok(issued) => issued,
        // serde's message may quote the body, which holds the token: only the position.
        Err(e) => {
            return failed(Failure::Invalid, format!("unreadable answer (line {}, column {})", e.line(), e.column()));
        }
    };
    if !(issued.token_type.eq_ignore_ascii_case("bearer") || issued.token_type.eq_ignore_ascii_case("n_a")) {
        return failed(
            Failure::Invalid,
            format!("token_type {:?} is not Bearer", clean(&issued.token_type, subject, 32)),
        );
    }
    if let Some(issued_type) = &issued.issued_token_type
        && issued_type != requested_token_type
        && issued_type != ACCESS_TOKEN_TYPE
        && issued_type != "urn:ietf:params:oauth:token-type:jwt"
    {
        return failed(Failure::Invalid, format!("issued a {}, not a bearer token", clean(issued_type, subject, 80)));
    }
    let token = issued.access_token;
    if token.is_empty() || token.len() > MAX_TOKEN || !token.bytes().all(|b| b.is_ascii_graphic()) {
        return failed(Failure::Invalid, "the issued access_token is not a usable bearer token".to_owned());
    }
    // An endpoint that hands the caller's token back would make the upstream see it.
    if token == subject {
        return failed(Failure::Invalid, "the endpoint gave the caller's own token back".to_owned());
    }
    let expires_in = match &issued.expires_in {
        None | Some(Value::Null) => None,
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        Some(Value::Number(n)) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64))
        }
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => return failed(Failure::Invalid, "expires_in is not a number".to_owned()),
    };
    Ok((UpstreamToken::new(&token), lifetime(expires_in)))
}

/// Text from the token endpoint fit for an error message: printable, clipped, and without the
/// caller's token.
fn clean(text: &str, subject: &str, max: usize) -> String {
    let text = if subject.is_empty() { text.to_owned() } else { text.replace(subject, "[redacted]") };
    printable(&text, max)
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::*;

    const SUBJECT: &str = "eyJ.client.jwt";

    fn config() -> TokenExchangeConfig {
        let mut c = TokenExchangeConfig::new("https://auth.example/token", "gate way", "s3cr:t&", "search");
        c.resource = Some("https://search.example/mcp".to_owned());
        c.scope = Some("read write".to_owned());
        c
    }

    #[test]
    fn the_request_is_form_encoded() {
        assert_eq!(form("a b&c=d/é*-._~"), "a+b%26c%3Dd%2F%C3%A9*-._%7E");
        assert_eq!(
            form_tail(&config()),
            "&subject_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
             &requested_token_type=urn%3Aietf%3Aparams%3Aoauth%3Atoken-type%3Aaccess_token\
             &audience=search&resource=https%3A%2F%2Fsearch.example%2Fmcp&scope=read+write"
        );
        let mut bare = config();
        bare.resource = None;
        bare.scope = None;
        assert!(form_tail(&bare).ends_with("&audience=search"));
        // RFC 6749 §2.3.1: id and secret form-encoded, then Basic.
        let basic = basic_authorization("gate way", "s3cr:t&");
        let decoded = base64::engine::general_purpose::STANDARD.decode(basic.strip_prefix("Basic ").unwrap()).unwrap();
        assert_eq!(String::from_utf8(decoded).unwrap(), "gate+way:s3cr%3At%26");
    }

    fn answer(status: u16, body: &str) -> Result<(UpstreamToken, Duration), (Failure, UpstreamError)> {
        read_answer(status, body.as_bytes(), SUBJECT, ACCESS_TOKEN_TYPE)
    }

    #[test]
    fn a_success_answer_gives_the_token_and_how_long_to_keep_it() {
        let ok = answer(
            200,
            r#"{"access_token":"up-1","issued_token_type":"urn:ietf:params:oauth:token-type:access_token","token_type":"Bearer","expires_in":300}"#,
        );
        assert_eq!(ok.unwrap(), (UpstreamToken::new("up-1"), Duration::from_secs(270)));
        let na = answer(200, r#"{"access_token":"up-2","token_type":"n_a"}"#).unwrap();
        assert_eq!(na, (UpstreamToken::new("up-2"), Duration::from_secs(60)), "no expires_in: a minute");
        let text = answer(200, r#"{"access_token":"up-3","token_type":"bearer","expires_in":"100"}"#).unwrap();
        assert_eq!(text.1, Duration::from_secs(70));
        let short = answer(200, r#"{"access_token":"up-4","token_type":"Bearer","expires_in":10}"#).unwrap();
        assert_eq!(short.1, Duration::ZERO, "used once, not kept");
    }

    fn failure(status: u16, body: &str) -> (Failure, String) {
        let (kind, e) = answer(status, body).unwrap_err();
        let text = e.to_string();
        assert!(!text.contains(SUBJECT), "{text}");
        (kind, text)
    }

    #[test]
    fn unusable_answers_are_refused_without_the_tokens() {
        let (kind, text) = failure(200, r#"{"access_token":"x","token_type":"DPoP"}"#);
        assert!(kind == Failure::Invalid && text.contains("DPoP"), "{text}");
        let (kind, _) = failure(200, &format!(r#"{{"access_token":"{SUBJECT}","token_type":"Bearer"}}"#));
        assert_eq!(kind, Failure::Invalid, "the caller's own token back");
        let (kind, text) = failure(200, r#"{"access_token":"secret-up\n","token_type":"Bearer"}"#);
        assert!(kind == Failure::Invalid && !text.contains("secret-up"), "{text}");
        let (kind, text) = failure(200, r#"{"access_token":"secret-up","token_type":"Bearer","expires_in":[1]}"#);
        assert!(kind == Failure::Invalid && !text.contains("secret-up"), "{text}");
        let (kind, text) = failure(200, r#"{"access_token":"secret-up","token_type":"Bearer""#);
        assert!(kind == Failure::Invalid && !text.contains("secret-up"), "{text}");
        let saml =
            r#"{"access_token":"x","token_type":"N_A","issued_token_type":"urn:ietf:params:oauth:token-type:saml2"}"#;
        assert_eq!(failure(200, saml).0, Failure::Invalid);
    }

    #[test]
    fn error_answers_name_the_oauth_error() {
        let (kind, text) = failure(
            400,
            &format!(r#"{{"error":"invalid_grant","error_description":"subject {SUBJECT} is not allowed here"}}"#),
        );
        assert_eq!(kind, Failure::Refused);
        assert!(text.contains("token exchange refused") && text.contains("invalid_grant"), "{text}");
        assert!(text.contains("[redacted]"), "{text}");
        let (kind, text) = failure(401, r#"{"error":"invalid_client"}"#);
        assert!(kind == Failure::Refused && text.ends_with("invalid_client"), "{text}");
        let (kind, text) = failure(503, "<html>down</html>");
        assert!(kind == Failure::Unavailable && text.contains("HTTP 503"), "{text}");
        let (kind, text) = failure(500, r#"{"error":"server_error"}"#);
        assert!(kind == Failure::Unavailable && text.contains("token exchange failed"), "{text}");
        let long = "x".repeat(1000);
        let (_, text) = failure(400, &format!(r#"{{"error":"invalid_request","error_description":"{long}"}}"#));
        assert!(text.len() < 300, "{text}");
    }

    /// A stand-in token endpoint: answers each request after `delay` with `tok-<n>` (or never,
    /// with `delay` = None); counts the requests and keeps their bodies.
    async fn endpoint(delay: Option<Duration>) -> (String, Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/token", listener.local_addr().unwrap());
        let bodies: Arc<Mutex<Vec<String>>> = Arc::default();
        let seen = bodies.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buffer = Vec::new();
                    let mut chunk = [0u8; 4096];
                    let body = loop {
                        let Ok(n) = socket.read(&mut chunk).await else { return };
                        if n == 0 {
                            return;
                        }
                        buffer.extend_from_slice(&chunk[..n]);
                        let text = String::from_utf8_lossy(&buffer).to_string();
                        let Some((head, body)) = text.split_once("\r\n\r\n") else { continue };
                        let length = head
                            .lines()
                            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:")?.trim().parse().ok())
                            .unwrap_or(0usize);
                        if body.len() >= length {
                            break body.to_owned();
                        }
                    };
                    let n = {
                        let mut seen = seen.lock().unwrap();
                        seen.push(body);
                        seen.len()
                    };
                    let Some(delay) = delay else {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        return;
                    };
                    tokio::time::sleep(delay).await;
                    let answer = format!(r#"{{"access_token":"tok-{n}","token_type":"Bearer","expires_in":300}}"#);
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{answer}",
                        answer.len()
                    );
                    let _ = socket.write_all(response.as_bytes()).await;
                });
            }
        });
        (url, bodies)
    }

    fn exchanger(url: &str, timeout_secs: Option<u64>) -> TokenExchanger {
        let mut upstream = UpstreamConfig::http("fm", "http://127.0.0.1:9/mcp");
        let mut config = TokenExchangeConfig::new(url, "gw", "secret", "fm");
        config.timeout_secs = timeout_secs;
        upstream.token_exchange = Some(config);
        TokenExchanger::for_upstream(&upstream).unwrap().unwrap()
    }

    fn failures(stats: &ExchangeStats, kind: &str) -> u64 {
        stats.failures().find(|(k, _)| *k == kind).map_or(0, |(_, n)| n)
    }

    #[tokio::test]
    async fn concurrent_requests_of_one_caller_share_one_exchange() {
        let (url, bodies) = endpoint(Some(Duration::from_millis(200))).await;
        let exchanger = exchanger(&url, None);
        let alice = Credential::bearer("alice-jwt");
        let tokens = futures_util::future::join_all((0..5).map(|_| exchanger.token(Some(&alice)))).await;
        for token in &tokens {
            assert_eq!(token.as_ref().unwrap(), &UpstreamToken::new("tok-1"));
        }
        let bob = exchanger.token(Some(&Credential::bearer("bob-jwt"))).await.unwrap();
        assert_eq!(bob, UpstreamToken::new("tok-2"), "another caller, another exchange");
        let stats = exchanger.stats();
        assert_eq!((stats.exchanges.load(Ordering::Relaxed), stats.cache_hits.load(Ordering::Relaxed)), (2, 4));
        let bodies = bodies.lock().unwrap().clone();
        assert_eq!(bodies.len(), 2);
        assert!(bodies[0].starts_with(
            "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Atoken-exchange&subject_token=alice-jwt&"
        ));
        assert!(exchanger.flights.lock().unwrap().is_empty(), "no flight left behind");
    }

    #[tokio::test]
    async fn no_caller_token_and_a_silent_endpoint_fail_without_a_token() {
        let (url, bodies) = endpoint(None).await;
        let exchanger = exchanger(&url, Some(1));
        assert!(matches!(exchanger.token(None).await, Err(UpstreamError::NoCallerToken)));
        // Three requests of one caller wait for one exchange and share its failure.
        let carol = Credential::bearer("carol-jwt");
        let started = Instant::now();
        let outcomes = futures_util::future::join_all((0..3).map(|_| exchanger.token(Some(&carol)))).await;
        assert!(started.elapsed() < Duration::from_secs(3), "waited {:?}", started.elapsed());
        for outcome in outcomes {
            let e = outcome.unwrap_err();
            assert!(
                matches!(&e, UpstreamError::TokenExchangeFailed { detail, source: None } if detail.contains("within 1 s")),
                "{e}"
            );
        }
        let stats = exchanger.stats();
        assert_eq!((failures(stats, "no_caller_token"), failures(stats, "timeout")), (1, 1));
        assert_eq!(bodies.lock().unwrap().len(), 1, "one exchange attempted");
        assert!(exchanger.flights.lock().unwrap().is_empty(), "no flight left behind");
        assert!(!format!("{exchanger:?}").contains("secret"));
    }
}
