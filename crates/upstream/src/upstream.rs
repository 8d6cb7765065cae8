//! `Upstream`: one server behind the gateway, as every call sees it: its configuration, its
//! transport, a per-replica concurrency limit, the call timeout, the circuit breaker and its
//! counters; and reading its lists.
//!
//! Invariant: every request to the upstream passes the breaker, holds a concurrency permit
//! for its whole duration, and ends within `timeout_secs` (waiting for a permit included);
//! a cancelled or timed-out request is withdrawn from the upstream. With token exchange, a
//! request made for a caller carries that caller's exchanged token or is not sent at all; the
//! exchange comes first, with its own timeout, before the breaker (a refused exchange says
//! nothing about the upstream's health); only the gateway's own list reads go without one.
//! With `auth = "oauth"`, a request is made for a principal or not at all (the gateway's own
//! list reads never reach such an upstream): it carries that principal's token — the one
//! the call's look-up of their connection found ([`HeldToken`]), else (or once that one is due
//! for a refresh) one asked of the installed [`Connections`] — and a 401/403 is reported to
//! them and retried once with the token they give back.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::prompt::Prompt;
use mcpgate_protocol::resource::{Resource, ResourceTemplate};
use mcpgate_protocol::tool::Tool as ToolInfo;
use mcpgate_runtime::{Credential, Principal};

use crate::breaker::{Breaker, BreakerState, Ticket};
use crate::config::UpstreamConfig;
use crate::error::{UpstreamError, cause};
use crate::oauth::{Connections, HeldToken, Refusal};
use crate::rpc;
use crate::token_cache::UpstreamToken;
use crate::token_exchange::{ExchangeStats, TokenExchanger};
use crate::transport::{Exchange, Link, Signals};

/// Most pages read of one list (a server that pages forever is cut off here).
const MAX_PAGES: usize = 100;

/// Latency histogram bucket bounds, in seconds (Prometheus `le`).
pub const LATENCY_BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];

/// Counters of one upstream (this replica).
#[derive(Debug, Default)]
pub struct UpstreamStats {
    /// Requests sent (admitted by the breaker).
    pub calls: AtomicU64,
    /// Failed requests by kind: unreachable, timeout, circuit_open, protocol, rpc, closed.
    errors: [AtomicU64; 8],
    /// Requests in flight.
    pub in_flight: AtomicU64,
    /// Latency histogram counts per bucket (cumulative on render), plus +Inf.
    latency: [AtomicU64; LATENCY_BUCKETS.len() + 1],
    /// Sum of latencies in microseconds.
    latency_sum_us: AtomicU64,
}

/// The error kinds counted, in `UpstreamStats::errors` order.
pub const ERROR_KINDS: [&str; 8] =
    ["unreachable", "timeout", "circuit_open", "protocol", "rpc", "closed", "cancelled", "config"];

impl UpstreamStats {
    fn error(&self, e: &UpstreamError) {
        if let Some(i) = ERROR_KINDS.iter().position(|k| *k == e.kind()) {
            self.errors[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    fn observe(&self, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let bucket = LATENCY_BUCKETS.iter().position(|&b| secs <= b).unwrap_or(LATENCY_BUCKETS.len());
        self.latency[bucket].fetch_add(1, Ordering::Relaxed);
        self.latency_sum_us.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// Errors by kind.
    pub fn errors(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        ERROR_KINDS.iter().zip(&self.errors).map(|(k, v)| (*k, v.load(Ordering::Relaxed)))
    }

    /// Per-bucket latency counts (not cumulative; the last is +Inf) and the sum in seconds.
    pub fn latency(&self) -> (Vec<u64>, f64) {
        let counts = self.latency.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        #[allow(clippy::cast_precision_loss)]
        let sum = self.latency_sum_us.load(Ordering::Relaxed) as f64 / 1e6;
        (counts, sum)
    }
}

/// What an upstream lists (stored as JSON so every replica can serve the last known lists).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Lists {
    /// Its tools.
    pub tools: Vec<ToolInfo>,
    /// Its prompts.
    pub prompts: Vec<Prompt>,
    /// Its resources.
    pub resources: Vec<Resource>,
    /// Its resource templates.
    pub templates: Vec<ResourceTemplate>,
}

/// One upstream.
#[derive(Debug)]
pub struct Upstream {
    config: Arc<UpstreamConfig>,
    link: Link,
    limiter: Semaphore,
    breaker: Breaker,
    signals: Arc<Signals>,
    stats: UpstreamStats,
    /// `[upstream.token_exchange]`: per-caller tokens.
    exchanger: Option<TokenExchanger>,
    /// `auth = "oauth"`: where each principal's token comes from (installed once, at start-up,
    /// through the federation, which shares this cell with every upstream).
    connections: ConnectionsCell,
}

/// Where `auth = "oauth"` upstreams get each caller's token, once installed.
pub(crate) type ConnectionsCell = Arc<OnceLock<Arc<dyn Connections>>>;

/// One request in flight: counted while it lives; its breaker ticket is given back unused if
/// it is dropped before an outcome was recorded.
struct Flight<'a> {
    upstream: &'a Upstream,
    ticket: Option<Ticket>,
}

impl<'a> Flight<'a> {
    fn new(upstream: &'a Upstream, ticket: Ticket) -> Self {
        upstream.stats.in_flight.fetch_add(1, Ordering::Relaxed);
        Self { upstream, ticket: Some(ticket) }
    }
}

impl Drop for Flight<'_> {
    fn drop(&mut self) {
        self.upstream.stats.in_flight.fetch_sub(1, Ordering::Relaxed);
        if let Some(ticket) = self.ticket.take() {
            self.upstream.breaker.abandon(ticket);
        }
    }
}

/// One request: the method, its params, how HTTP headers mirror it, and for whom it is made.
#[derive(Debug)]
pub struct Request {
    pub(crate) exchange: Exchange,
    on_behalf: OnBehalf,
    /// `auth = "oauth"`: the caller's token as their call's look-up found it (sent while fresh,
    /// instead of asking the connections again).
    held: Option<HeldToken>,
}

/// For whom a request is made: what decides its token with token exchange or OAuth.
#[derive(Debug)]
enum OnBehalf {
    /// The gateway itself (reading lists): no caller token, no `Authorization`.
    Gateway,
    /// A caller (`None`: unknown, and neither a token-exchange nor an oauth upstream is
    /// called); its principal carries the token it presented, if any.
    Caller(Option<Principal>),
}

impl Request {
    /// A request made for a caller, by default one with no token (see [`Request::caller`]).
    pub fn new(method: &'static str, params: Value) -> Self {
        Self {
            exchange: Exchange {
                method,
                params,
                name: None,
                param_headers: Vec::new(),
                progress: None,
                bearer: None,
                questions: None,
                holder: None,
            },
            on_behalf: OnBehalf::Caller(None),
            held: None,
        }
    }

    /// A request of the gateway's own (list reads): no caller, so no exchanged token.
    pub fn discovery(method: &'static str, params: Value) -> Self {
        Self { on_behalf: OnBehalf::Gateway, ..Self::new(method, params) }
    }

    /// Made for `principal`: with token exchange, the token it presented is exchanged; with
    /// `auth = "oauth"`, its own connection's token is sent (otherwise unused).
    #[must_use]
    pub fn caller(mut self, principal: &Principal) -> Self {
        self.on_behalf = OnBehalf::Caller(Some(principal.clone()));
        self
    }

    /// With `held`, the token a look-up of the caller's connection found (an `auth = "oauth"`
    /// upstream; made for the principal it was looked up for, see [`Request::caller`]).
    #[must_use]
    pub(crate) fn holding(mut self, held: Option<&HeldToken>) -> Self {
        self.held = held.cloned();
        self
    }

    fn credential(&self) -> Option<&Credential> {
        match &self.on_behalf {
            OnBehalf::Caller(Some(principal)) => principal.credential(),
            _ => None,
        }
    }

    /// Sets the `Mcp-Name` value.
    #[must_use]
    pub fn name(mut self, name: &str) -> Self {
        self.exchange.name = Some(name.to_owned());
        self
    }

    /// Adds `Mcp-Param-*` headers.
    #[must_use]
    pub fn param_headers(mut self, headers: Vec<(String, String)>) -> Self {
        self.exchange.param_headers = headers;
        self
    }

    /// Hands the server's requests sent on this request's own response stream to `sink`
    /// (otherwise they are refused at once).
    #[must_use]
    pub(crate) fn questions(mut self, sink: tokio::sync::mpsc::Sender<crate::rpc::ServerRequest>) -> Self {
        self.exchange.questions = Some(sink);
        self
    }

    /// Relays progress to `sink` (the request then carries a progress token).
    #[must_use]
    pub fn progress(mut self, sink: tokio::sync::mpsc::Sender<crate::rpc::Progress>) -> Self {
        self.exchange.progress = Some(sink);
        self
    }
}

impl Upstream {
    /// An upstream from a validated configuration; nothing is started or connected yet.
    pub fn new(config: UpstreamConfig) -> Result<Self, UpstreamError> {
        Self::with_connections(config, ConnectionsCell::default())
    }

    /// Like [`Upstream::new`], taking `auth = "oauth"` tokens from `connections` once installed.
    pub(crate) fn with_connections(
        config: UpstreamConfig,
        connections: ConnectionsCell,
    ) -> Result<Self, UpstreamError> {
        let config = Arc::new(config);
        let signals = Arc::new(Signals::default());
        let link = Link::new(config.clone(), signals.clone())?;
        Ok(Self {
            exchanger: TokenExchanger::for_upstream(&config)?,
            limiter: Semaphore::new(usize::try_from(config.max_concurrency).unwrap_or(64)),
            breaker: Breaker::new(config.breaker_failures, Duration::from_secs(config.breaker_cooldown_secs)),
            config,
            link,
            signals,
            stats: UpstreamStats::default(),
            connections,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.config.name
    }

    /// Its counters.
    pub fn stats(&self) -> &UpstreamStats {
        &self.stats
    }

    /// Its token exchange counters, when it exchanges caller tokens.
    pub fn token_exchange_stats(&self) -> Option<&ExchangeStats> {
        self.exchanger.as_ref().map(TokenExchanger::stats)
    }

    /// Its breaker's state.
    pub fn breaker_state(&self) -> BreakerState {
        self.breaker.state()
    }

    /// stdio restarts so far.
    pub fn restarts(&self) -> u64 {
        self.signals.restarts.load(Ordering::Relaxed)
    }

    /// Routes the server's requests about upstream task `task` (2025-11-25 `related-task`) to
    /// the returned route while it lives; others are refused.
    pub(crate) fn route(&self, task: &str) -> crate::transport::Route {
        self.signals.route(task)
    }

    /// Answers a request of the server's: `result` (raw JSON) or an error, for `caller`.
    pub(crate) async fn respond(
        &self,
        request: &crate::rpc::ServerRequest,
        outcome: Result<&str, (i64, &str)>,
        caller: &Principal,
    ) -> Result<(), UpstreamError> {
        let (bearer, holder) = if self.config.is_oauth() {
            let token = self.connections()?.bearer(self.name(), caller).await?;
            (Some(UpstreamToken::new(token.expose())), Some(Arc::from(caller.key())))
        } else {
            match &self.exchanger {
                Some(exchanger) => (Some(exchanger.token(caller.credential()).await?), None),
                None => (None, None),
            }
        };
        // Bounded: the caller awaits this inside its call, whose own timeout is not polled
        // meanwhile (an upstream that never answers the POST must not hold the call for ever).
        let limit = self.config.timeout();
        tokio::time::timeout(limit, self.link.send_only(crate::rpc::response(&request.id, outcome), bearer, holder))
            .await
            .unwrap_or_else(|_| {
                Err(UpstreamError::unreachable(format!("no answer to a response within {} s", limit.as_secs())))
            })
    }

    /// The installed connections of an `auth = "oauth"` upstream.
    fn connections(&self) -> Result<&Arc<dyn Connections>, UpstreamError> {
        self.connections
            .get()
            .ok_or_else(|| UpstreamError::authorization("per-user connections are not set up on this replica"))
    }

    /// Resolves when the upstream announces a list change.
    pub async fn list_changed(&self) {
        self.signals.list_changed.notified().await;
    }

    /// Stops its process (stdio).
    pub fn shutdown(&self) {
        self.link.shutdown();
    }

    /// Sends one request; the result as raw JSON. Fails fast when the breaker is open;
    /// `cancel` withdraws it.
    pub async fn request(
        &self,
        mut request: Request,
        cancel: &CancellationToken,
    ) -> Result<Box<RawValue>, UpstreamError> {
        // Boxed, these and the exchange below: each holds a whole `send` or an HTTP request of
        // its own, which every other call's future would otherwise carry (and copy).
        if self.config.is_oauth() {
            return Box::pin(self.request_for_principal(request, cancel)).await;
        }
        if let (Some(exchanger), OnBehalf::Caller(_)) = (&self.exchanger, &request.on_behalf) {
            let token = tokio::select! {
                token = Box::pin(exchanger.token(request.credential())) => token?,
                () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
            };
            request.exchange.bearer = Some(token);
        }
        self.send(request.exchange, cancel).await
    }

    /// An `auth = "oauth"` upstream's request: with the principal's own token (the one it
    /// holds while fresh, else asked for now), on the principal's own session; a refused
    /// token is reported and the request sent once more with the token the connections give
    /// back (refreshed, or refreshed meanwhile elsewhere);
    /// that one refused too is reported as such (the connections drop the connection and ask
    /// the user to connect again). Cancelling stops the wait only: a refresh under way
    /// finishes (the connections run it apart), so a rotated refresh token is never lost.
    async fn request_for_principal(
        &self,
        request: Request,
        cancel: &CancellationToken,
    ) -> Result<Box<RawValue>, UpstreamError> {
        let held = request.held;
        let principal = match request.on_behalf {
            OnBehalf::Caller(Some(principal)) => principal,
            // Never without a caller: its token is the only credential this upstream takes.
            OnBehalf::Caller(None) | OnBehalf::Gateway => {
                return Err(UpstreamError::authorization(
                    "each caller's requests carry their own connection; this one names no caller".to_owned(),
                ));
            }
        };
        let connections = self.connections()?;
        let name = self.name();
        let mut token = match held.as_ref().and_then(HeldToken::fresh) {
            Some(token) => token,
            None => {
                let token = tokio::select! {
                    token = connections.bearer(name, &principal) => token?,
                    () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
                };
                // The held token stays due, so the requests after this one ask again: a
                // token handed out here comes without its expiry, which is checked only by
                // asking.
                token
            }
        };
        let mut exchange = request.exchange;
        exchange.holder = Some(Arc::from(principal.key()));
        // The first 401 gets a fresh token; a 401 for that one drops the connection.
        for again in [false, true] {
            exchange.bearer = Some(UpstreamToken::new(token.expose()));
            let (status, challenge) = match self.send(exchange.clone(), cancel).await {
                Err(UpstreamError::TokenRefused { status, challenge }) => (status, challenge),
                other => return other,
            };
            let refusal = match (status, again) {
                (403, _) => Refusal::Forbidden,
                (_, false) => Refusal::Unauthorized,
                (_, true) => Refusal::StillUnauthorized,
            };
            tracing::debug!(upstream = %name, principal = %principal.log_id(), status, "the upstream refused the caller's token");
            token = tokio::select! {
                fresh = connections.refused(name, &principal, &token, refusal, challenge.as_ref()) => fresh?,
                () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
            };
            if let Some(held) = &held {
                held.refused();
            }
        }
        // Connections that gave yet another token for a connection refused twice: not tried.
        Err(UpstreamError::authorization("the upstream refused the caller's token twice"))
    }

    /// Sends one exchange through the breaker, the concurrency limit and the timeout.
    async fn send(&self, exchange: Exchange, cancel: &CancellationToken) -> Result<Box<RawValue>, UpstreamError> {
        let ticket = self.breaker.admit().inspect_err(|e| self.stats.error(e))?;
        self.stats.calls.fetch_add(1, Ordering::Relaxed);
        // Also when this future is dropped mid-call (a caller's own timeout): the count goes
        // down and a half-open breaker's probe ticket comes back.
        let mut flight = Flight::new(self, ticket);
        let started = tokio::time::Instant::now();
        let timeout = self.config.timeout();
        // Spans (and the OTLP export) carry the upstream's name and the method.
        let span = tracing::debug_span!("upstream", upstream = %self.config.name, method = exchange.method);
        let work = async {
            let _permit = self.limiter.acquire().await.map_err(|_| UpstreamError::closed("shut down"))?;
            self.link.exchange(exchange).await
        };
        let work = tracing::Instrument::instrument(work, span);
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, work) => r.unwrap_or(Err(UpstreamError::Timeout { secs: timeout.as_secs() })),
            () = cancel.cancelled() => Err(UpstreamError::Cancelled),
        };
        self.stats.observe(started.elapsed());
        if let Some(ticket) = flight.ticket.take() {
            match &outcome {
                Err(UpstreamError::Cancelled) => self.breaker.abandon(ticket),
                Err(e) => self.breaker.record(ticket, !e.is_health_failure()),
                Ok(_) => self.breaker.record(ticket, true),
            }
        }
        drop(flight);
        if let Err(e) = &outcome {
            self.stats.error(e);
        }
        outcome
    }

    /// Reads every list the server offers (all pages). A list its capabilities do not offer is
    /// not asked for; one it does not serve after all (method not found, which 2026-07-28 sends
    /// as HTTP 404) is empty; one that fails otherwise is left out (logged) while the others
    /// are kept. Fails only when no list could be read at all (the upstream is down).
    pub async fn lists(&self, cancel: &CancellationToken) -> Result<Lists, UpstreamError> {
        if self.config.is_oauth() {
            // Read per caller, with the caller's token (see `PersonalTools`); the shared
            // catalog holds its `<upstream>_connect` stand-in only.
            return Ok(Lists::default());
        }
        let offered = tokio::select! {
            offered = tokio::time::timeout(self.config.timeout(), self.link.offered()) => offered,
            () = cancel.cancelled() => return Err(UpstreamError::Cancelled),
        };
        let (offered, reached) = offered.ok().and_then(Result::ok).unwrap_or_default();
        // The upstream answered: it is back, and the list reads below (and calls) need not
        // wait out an open breaker's cool-down.
        if reached {
            self.breaker.reached();
        }
        // Unknown (or the handshake failed: the first list read says why): ask for everything.
        let (tools, prompts, resources) = offered.map_or((true, true, true), |o| (o.tools, o.prompts, o.resources));
        let mut failures: Vec<(&str, UpstreamError)> = Vec::new();
        let mut read = 0;
        let mut keep = |method: &'static str, result: Result<(), UpstreamError>| match result {
            Ok(()) => read += 1,
            Err(e) => failures.push((method, e)),
        };
        let mut lists = Lists::default();
        if tools {
            keep("tools/list", self.list("tools/list", "tools", cancel).await.map(|l| lists.tools = l));
        }
        if prompts {
            keep("prompts/list", self.list("prompts/list", "prompts", cancel).await.map(|l| lists.prompts = l));
        }
        if resources {
            let read = self.list("resources/list", "resources", cancel).await;
            keep("resources/list", read.map(|l| lists.resources = l));
            let read = self.list("resources/templates/list", "resourceTemplates", cancel).await;
            keep("resources/templates/list", read.map(|l| lists.templates = l));
        }
        let asked = read + failures.len();
        match failures.into_iter().next() {
            Some((_, e)) if read == 0 && asked > 0 => Err(e),
            Some((method, e)) => {
                tracing::warn!(upstream = %self.config.name, error = &e as &dyn std::error::Error, "{method} failed; the other lists are served");
                Ok(lists)
            }
            None => Ok(lists),
        }
    }

    async fn list<T: for<'de> Deserialize<'de>>(
        &self,
        method: &'static str,
        member: &str,
        cancel: &CancellationToken,
    ) -> Result<Vec<T>, UpstreamError> {
        self.list_pages(method, member, None, None, cancel).await.map(|(items, _)| items)
    }

    /// The tools an `auth = "oauth"` upstream lists for `principal` (read with their own
    /// token: `held`, as their look-up found it, else asked for), and how long the upstream
    /// said the list may be kept (`ttlMs`), if it did.
    pub(crate) async fn tools_for(
        &self,
        principal: &Principal,
        held: Option<&HeldToken>,
        cancel: &CancellationToken,
    ) -> Result<(Vec<ToolInfo>, Option<u64>), UpstreamError> {
        self.list_pages("tools/list", "tools", Some(principal), held, cancel).await
    }

    /// Reads every page of a list, made for `caller` (`None`: the gateway's own read), each
    /// with the token `held` (an `oauth` upstream's caller's); with the first page's `ttlMs`.
    async fn list_pages<T: for<'de> Deserialize<'de>>(
        &self,
        method: &'static str,
        member: &str,
        caller: Option<&Principal>,
        held: Option<&HeldToken>,
        cancel: &CancellationToken,
    ) -> Result<(Vec<T>, Option<u64>), UpstreamError> {
        let mut items = Vec::new();
        let mut ttl_ms = None;
        let mut cursor: Option<String> = None;
        for page_number in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let request = match caller {
                Some(principal) => Request::new(method, rpc::discovery_params(params)).caller(principal).holding(held),
                None => Request::discovery(method, rpc::discovery_params(params)),
            };
            let page = match self.request(request, cancel).await {
                Ok(page) => page,
                Err(UpstreamError::Rpc { code: -32601, .. }) => return Ok((Vec::new(), None)),
                Err(e) => return Err(e),
            };
            let mut page: Value = serde_json::from_str(page.get())
                .map_err(|e| UpstreamError::Protocol { detail: format!("{method} result"), source: Some(cause(e)) })?;
            if page_number == 0 {
                ttl_ms = page.get("ttlMs").and_then(Value::as_u64);
            }
            if let Some(Value::Array(list)) = page.get_mut(member).map(Value::take) {
                for item in list {
                    match serde_json::from_value::<T>(item) {
                        Ok(item) => items.push(item),
                        Err(e) => {
                            tracing::warn!(upstream = %self.config.name, "skipped an invalid entry of {method}: {e}")
                        }
                    }
                }
            }
            cursor = page.get("nextCursor").and_then(Value::as_str).filter(|c| !c.is_empty()).map(str::to_owned);
            if cursor.is_none() {
                break;
            }
        }
        Ok((items, ttl_ms))
    }
}
