//! Streamable HTTP upstreams, both eras. 2026-07-28: stateless, every POST carries `_meta` and the
//! `Mcp-Method` / `Mcp-Name` / `Mcp-Param-*` headers derived from the body actually sent; an unknown
//! method comes back as HTTP 404 with a JSON-RPC error, which is that error (the method is not
//! served), not a lost session nor an unreachable server. Earlier versions: one session per replica,
//! opened lazily by `initialize`, reused by every call, and opened again when the server answers 404
//! (the session expired) — the request is then sent once more, since a 404 means it never ran.
//! Answers come as JSON or as an SSE stream (progress relayed as it arrives); a session's stream that
//! ends before the answer is resumed after its `retry` delay by a GET with `Last-Event-ID`
//! (SEP-1699), a bounded number of times. A session also listens on the server's standalone GET
//! stream, where servers announce list changes outside any request (a server that offers none answers
//! 405 and is not asked again); the listener ends with its session.
//!
//! Invariants: the client's credentials never travel upstream (only the configured `headers`, and,
//! with token exchange, the caller's *exchanged* token on the requests made for that caller: never on
//! the handshake, the GET stream or list reads; with `auth = "oauth"`, the caller's own upstream
//! token on every request made for them, the handshake of their own session included, and a 401, or a
//! 403 for want of scope, comes back as `TokenRefused`); no body or event is buffered past
//! `max_message_bytes`, and an event over it on a call's stream fails the call unless it is another
//! message's; the GET stream is dropped (and opened again) when it leaves an event unfinished for
//! `event_timeout_secs`; URLs in errors carry no userinfo or query.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpgate_protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use mcpgate_protocol::mirrored;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::value::RawValue;
use serde_json::{Value, json};

mod answer;
mod cancel;

use self::cancel::CancelGuard;
use super::client::{bearer_header, client_for};
use super::listener::Listener;
use super::pool::Pool;
use super::reply::Reply;
use super::sessions::Sessions;
use super::{Exchange, Signals};
use crate::config::{EraChoice, UpstreamConfig};
use crate::error::{Cause, UpstreamError, cause, unlocated};
use crate::rpc::{self, Negotiated, Offered};

/// Most per-principal sessions kept of one `auth = "oauth"` upstream, per replica.
const MAX_PRINCIPAL_SESSIONS: usize = 1024;
/// A per-principal session unused this long is dropped first when room is needed.
const PRINCIPAL_SESSION_IDLE: Duration = Duration::from_secs(600);
/// An idle connection kept longer than this is closed (as the general client's pool does).
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The negotiated protocol and, for earlier versions, the session.
#[derive(Debug, Clone)]
struct Session {
    negotiated: Negotiated,
    id: Option<String>,
    /// The lists the server's capabilities offer (`None`: it named none).
    offered: Option<Offered>,
    generation: u64,
    /// Stops the session's GET-stream listener when the session is dropped.
    _listener: Option<Arc<tokio_util::sync::DropGuard>>,
}

/// A Streamable HTTP upstream.
pub(crate) struct Http {
    config: Arc<UpstreamConfig>,
    signals: Arc<Signals>,
    client: reqwest::Client,
    /// The endpoint, parsed once.
    url: reqwest::Url,
    /// Connections its POSTs travel on, driven by the calls themselves: a plain-`http`
    /// endpoint reached without a proxy (`None`: every request goes through `client`).
    pool: Option<Box<Pool>>,
    /// The configured headers (credentials: never logged).
    headers: HeaderMap,
    /// One session for all, or (`auth = "oauth"`) one per principal, opened with its token.
    sessions: Sessions<Session>,
    generations: AtomicU64,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Http {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Http").field("upstream", &self.config.name).finish_non_exhaustive()
    }
}

/// How one POST ended.
enum Posted {
    /// The answer to the request.
    Answer(Result<Box<RawValue>, UpstreamError>),
    /// 202: a notification was accepted.
    Accepted,
    /// 404 on a session: it expired; nothing ran.
    SessionGone,
}

impl Http {
    pub(crate) fn new(config: Arc<UpstreamConfig>, signals: Arc<Signals>) -> Result<Self, UpstreamError> {
        let (client, headers) = client_for(&config)?;
        let caused = |problem: &str, source: Cause| UpstreamError::Config {
            upstream: config.name.clone(),
            key: "url".to_owned(),
            problem: problem.to_owned(),
            source: Some(source),
        };
        let url = reqwest::Url::parse(config.url.as_deref().unwrap_or_default())
            .map_err(|e| caused("not a valid URL", cause(e)))?;
        // A proxy the environment names for it (`HTTP_PROXY`, as the general client honours)
        // keeps every request on the general client.
        let proxied = hyper_util::client::proxy::matcher::Matcher::from_env()
            .intercept(&url.as_str().parse().unwrap_or_default())
            .is_some();
        let idle = usize::try_from(config.max_concurrency).unwrap_or(64);
        let pool = match proxied {
            true => None,
            false => Pool::for_url(&url, idle, POOL_IDLE_TIMEOUT, config.connect_timeout())
                .map_err(|(problem, source)| caused(problem, source))?
                .map(Box::new),
        };
        let sessions = if config.is_oauth() {
            Sessions::per_principal(MAX_PRINCIPAL_SESSIONS, PRINCIPAL_SESSION_IDLE)
        } else {
            Sessions::shared()
        };
        Ok(Self {
            config,
            signals,
            client,
            url,
            pool,
            headers,
            sessions,
            generations: AtomicU64::new(0),
            next_id: AtomicU64::new(1),
        })
    }

    pub(crate) async fn exchange(&self, mut ex: Exchange) -> Result<Box<RawValue>, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if ex.progress.is_some()
            && let Value::Object(params) = &mut ex.params
            && let Value::Object(meta) = params.entry("_meta").or_insert_with(|| json!({}))
        {
            meta.insert("progressToken".to_owned(), json!(id));
        }
        for attempt in 0..2 {
            let session = self.session(&ex).await?;
            let body = rpc::request(id, ex.method, &mut ex.params, &session.negotiated);
            let guard = CancelGuard {
                client: &self.client,
                url: &self.url,
                headers: &self.headers,
                session: session.id.as_deref().map(|sid| (sid, session.negotiated.version())),
                id,
                bearer: ex.bearer.as_ref(),
            };
            // While in flight it counts among the requests a question on the session's GET
            // stream may belong to, and takes such questions if it can answer them.
            let _taking = self.signals.taking(id, ex.questions.clone());
            let posted = self.post(&session, body, Some(id), &ex).await;
            guard.finish();
            match posted? {
                Posted::Answer(answer) => return answer,
                Posted::Accepted => {
                    return Err(UpstreamError::protocol("202 Accepted for a request"));
                }
                Posted::SessionGone if attempt == 0 && session.id.is_some() => {
                    tracing::info!(upstream = %self.config.name, "upstream session expired; opening a new one");
                    self.forget(ex.holder.as_deref(), session.generation).await;
                }
                Posted::SessionGone => break,
            }
        }
        Err(UpstreamError::unreachable("HTTP 404 (not found)"))
    }

    /// POSTs a message that expects no answer (a response to the server's request) on the
    /// current session of `holder`, for the caller whose token is `bearer`.
    pub(crate) async fn send_only(
        &self,
        body: Vec<u8>,
        bearer: Option<crate::token_cache::UpstreamToken>,
        holder: Option<Arc<str>>,
    ) -> Result<(), UpstreamError> {
        let reply = Exchange { bearer, holder, ..response_exchange() };
        let session = self.session(&reply).await?;
        match self.post(&session, body, None, &reply).await? {
            Posted::SessionGone => Err(UpstreamError::unreachable("HTTP 404 (session gone)")),
            _ => Ok(()),
        }
    }

    /// The current session of the request's holder, negotiating one when there is none (for
    /// an `auth = "oauth"` upstream with the request's own token: the session is its caller's).
    async fn session(&self, ex: &Exchange) -> Result<Arc<Session>, UpstreamError> {
        let slot = self.sessions.slot(ex.holder.as_deref());
        let mut slot = slot.lock().await;
        if let Some(session) = &*slot {
            return Ok(Arc::clone(session));
        }
        let bearer = if self.config.is_oauth() { ex.bearer.clone() } else { None };
        let session =
            // Boxed: the handshake's future is large and rarely run; calls should not carry it.
            tokio::time::timeout(self.config.connect_timeout(), Box::pin(self.negotiate(bearer))).await.unwrap_or_else(|_| {
                Err(UpstreamError::unreachable(format!("no handshake within {} s", self.config.connect_timeout_secs)))
            })?;
        tracing::info!(upstream = %self.config.name, version = session.negotiated.version(), "upstream connected");
        let session = Arc::new(session);
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    async fn forget(&self, holder: Option<&str>, generation: u64) {
        let slot = self.sessions.slot(holder);
        let mut slot = slot.lock().await;
        if slot.as_ref().is_some_and(|s| s.generation == generation) {
            *slot = None;
        }
    }

    /// The lists the server offers, as its capabilities say (`None`: unknown), negotiating a
    /// session when there is none. A 2026-07-28 server is asked again (`server/discover`) when
    /// the session was already open: its capabilities may have changed since.
    /// What the server offers, and whether the upstream answered an exchange to say so (a
    /// handshake made now, or a fresh `server/discover`) rather than from a kept session.
    pub(crate) async fn offered(&self) -> Result<(Option<Offered>, bool), UpstreamError> {
        let existed = self.sessions.slot(None).lock().await.is_some();
        let session = self.session(&response_exchange()).await?;
        if existed && session.negotiated == Negotiated::Modern {
            let fresh = tokio::time::timeout(self.config.timeout(), self.discover(&session, None)).await;
            if let Ok(Ok(Posted::Answer(Ok(result)))) = fresh {
                return Ok((Offered::from_result(&result), true));
            }
        }
        Ok((session.offered, !existed))
    }

    /// Sends `server/discover` on a modern session (declaring what the gateway can relay),
    /// with `bearer` (an `auth = "oauth"` upstream's caller token).
    async fn discover(
        &self,
        modern: &Session,
        bearer: Option<crate::token_cache::UpstreamToken>,
    ) -> Result<Posted, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut probe = Exchange {
            method: "server/discover",
            params: rpc::discovery_params(json!({})),
            name: None,
            param_headers: Vec::new(),
            progress: None,
            bearer,
            questions: None,
            holder: None,
        };
        let body = rpc::request(id, probe.method, &mut probe.params, &modern.negotiated);
        self.post(modern, body, Some(id), &probe).await
    }

    /// Opens a session; `bearer` goes on every handshake request (an `auth = "oauth"`
    /// upstream's caller token: the session is that caller's).
    async fn negotiate(&self, bearer: Option<crate::token_cache::UpstreamToken>) -> Result<Session, UpstreamError> {
        let generation = self.generations.fetch_add(1, Ordering::Relaxed);
        let era = self.config.era;
        if matches!(era, EraChoice::Auto | EraChoice::V2026_07_28) {
            let mut modern =
                Session { negotiated: Negotiated::Modern, id: None, offered: None, generation, _listener: None };
            // A 2026-07-28 server that refuses the version asked for (-32022, naming the ones it
            // speaks) is asked once more: that is the retry SEP-2575 expects of a client.
            for attempt in 0..2 {
                // Legacy servers answer 400, 404, 405 or a JSON-RPC error: all mean "try initialize".
                match self.discover(&modern, bearer.clone()).await? {
                    Posted::Answer(Ok(result)) if rpc::discover_offers_modern(&result) => {
                        modern.offered = Offered::from_result(&result);
                        return Ok(modern);
                    }
                    // A refused token says nothing about the era: the caller must reconnect.
                    Posted::Answer(Err(e @ UpstreamError::TokenRefused { .. })) => return Err(e),
                    Posted::Answer(Err(UpstreamError::Rpc { code: -32022, .. })) if attempt == 0 => {}
                    _ if era == EraChoice::Auto => break,
                    _ => {
                        return Err(UpstreamError::protocol("the server does not offer 2026-07-28"));
                    }
                }
            }
        }
        let version = era.legacy_version();
        let opening = Session {
            negotiated: Negotiated::Legacy { version: version.to_owned() },
            id: None,
            offered: None,
            generation,
            _listener: None,
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut init = Exchange {
            method: "initialize",
            params: rpc::initialize_params(version),
            name: None,
            param_headers: Vec::new(),
            progress: None,
            bearer: bearer.clone(),
            questions: None,
            holder: None,
        };
        let body = rpc::request(id, init.method, &mut init.params, &opening.negotiated);
        let response = self.send(&opening, body, &init).await?;
        let session_id = response
            .headers()
            .get(MCP_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .filter(|v| !v.is_empty() && v.len() <= 1024)
            .map(str::to_owned);
        let result = match self.read_answer(&opening, response, id, &init).await? {
            Posted::Answer(answer) => answer?,
            _ => return Err(UpstreamError::protocol("no answer to initialize")),
        };
        let mut session = Session {
            negotiated: rpc::negotiated_from_initialize(&result)?,
            id: session_id,
            offered: Offered::from_result(&result),
            generation,
            _listener: None,
        };
        let note = Exchange {
            method: "notifications/initialized",
            params: json!({}),
            name: None,
            param_headers: Vec::new(),
            progress: None,
            bearer,
            questions: None,
            holder: None,
        };
        let body = rpc::notification(note.method, json!({}));
        if let Err(e) = self.post(&session, body, None, &note).await {
            tracing::debug!(upstream = %self.config.name, error = &e as &dyn std::error::Error, "notifications/initialized was not accepted");
        }
        // An `auth = "oauth"` session has no listener: its GET stream would need a caller's
        // token that expires under it; its users' lists are re-read per principal instead.
        if let Some(id) = session.id.as_ref().filter(|_| !self.config.is_oauth()) {
            let stop = tokio_util::sync::CancellationToken::new();
            let listener = Listener {
                client: self.client.clone(),
                url: self.url.clone(),
                headers: self.headers.clone(),
                signals: self.signals.clone(),
                name: self.config.name.clone(),
                max: usize::try_from(self.config.max_message_bytes).unwrap_or(usize::MAX),
                event_timeout: self.config.event_timeout(),
            };
            tokio::spawn(listener.run(id.clone(), session.negotiated.version().to_owned(), stop.clone()));
            session._listener = Some(Arc::new(stop.drop_guard()));
        }
        Ok(session)
    }

    /// Sends a POST and returns the response, whatever its status: on a pooled connection
    /// this call drives itself when there is a pool, else through the general client.
    async fn send(&self, session: &Session, body: Vec<u8>, ex: &Exchange) -> Result<Reply<'_>, UpstreamError> {
        let headers = self.post_headers(session, ex)?;
        if let Some(pool) = &self.pool {
            return pool.post(headers, body).await.map(Reply::Pooled);
        }
        let request = self.client.post(self.url.clone()).headers(headers).body(body);
        request
            .send()
            .await
            .map(Reply::General)
            .map_err(|e| UpstreamError::Unreachable { detail: None, source: Some(unlocated(e)) })
    }

    /// The headers of a POST: the configured ones, the content and protocol headers, the
    /// session, the modern `Mcp-*` headers mirrored from the body, and the caller's token.
    fn post_headers(&self, session: &Session, ex: &Exchange) -> Result<HeaderMap, UpstreamError> {
        let mut headers = self.headers.clone();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        let version = match &session.negotiated {
            Negotiated::Modern => HeaderValue::from_static(rpc::MODERN_VERSION),
            Negotiated::Legacy { version } => header_value(version)?,
        };
        headers.insert(MCP_PROTOCOL_VERSION, version);
        if let Some(id) = &session.id {
            headers.insert(MCP_SESSION_ID, header_value(id)?);
        }
        if session.negotiated == Negotiated::Modern {
            headers.insert(MCP_METHOD, HeaderValue::from_static(ex.method));
            if let Some(name) = &ex.name {
                headers.insert(MCP_NAME, header_value(&mirrored::encode(name))?);
            }
            for (header, value) in &ex.param_headers {
                let header = HeaderName::try_from(header.as_str())
                    .map_err(|_| UpstreamError::protocol("a mirrored header name is invalid"))?;
                headers.append(header, header_value(&mirrored::encode(value))?);
            }
        }
        if let Some(bearer) = &ex.bearer {
            // Never sent without it (the exchange only accepts header-safe tokens).
            let value = bearer_header(bearer).ok_or_else(|| UpstreamError::TokenExchangeFailed {
                detail: "the exchanged token is not a valid header value".to_owned(),
                source: None,
            })?;
            headers.insert(AUTHORIZATION, value);
        }
        Ok(headers)
    }

    async fn post(
        &self,
        session: &Session,
        body: Vec<u8>,
        id: Option<u64>,
        ex: &Exchange,
    ) -> Result<Posted, UpstreamError> {
        let response = self.send(session, body, ex).await?;
        match id {
            Some(id) => self.read_answer(session, response, id, ex).await,
            None if response.status().is_success() => Ok(Posted::Accepted),
            None => Err(UpstreamError::unreachable(format!("HTTP {}", response.status()))),
        }
    }
}

/// What a POST of a response (to the server's request) is sent as.
fn response_exchange() -> Exchange {
    Exchange {
        method: "response",
        params: json!({}),
        name: None,
        param_headers: Vec::new(),
        progress: None,
        bearer: None,
        questions: None,
        holder: None,
    }
}

/// A header value from text an upstream or a caller chose (a session id, a mirrored value).
fn header_value(text: &str) -> Result<HeaderValue, UpstreamError> {
    HeaderValue::try_from(text).map_err(|_| UpstreamError::protocol("a header value mcpgate cannot send"))
}
