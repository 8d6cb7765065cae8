//! `AppState`: everything a replica shares across requests, built once from the config.
//!
//! Invariant: nothing in here changes per request or remembers a client; the only mutable
//! parts are counters, the concurrency limiter and the shutdown signals.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_seal::{KeyRing, Sealer};

use crate::auth::Authenticator;
use crate::config::{AuthMode, Config};
use crate::error::GatewayError;
use crate::http::origin::OriginPolicy;
use crate::mcp::discover_result;
use crate::metrics::Metrics;
use mcpgate_runtime::catalog::{Catalog, CatalogBuilder, ListRendering};
use mcpgate_runtime::toolsets;

/// Shared state of one replica (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

/// The contents of [`AppState`].
#[derive(Debug)]
pub struct Inner {
    /// The validated configuration.
    pub config: Config,
    /// Tools, prompts and resources.
    pub catalog: Catalog,
    /// Seals legacy session ids (and requestState).
    pub sealer: Sealer,
    /// Authenticates requests.
    pub auth: Authenticator,
    /// Host/Origin policy.
    pub origin: OriginPolicy,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Concurrency limit.
    pub limiter: Arc<Semaphore>,
    /// Bytes of request bodies that may be buffered at once (one permit per byte).
    pub body_budget: Arc<Semaphore>,
    /// `serverInfo`.
    pub server_info: Arc<Implementation>,
    /// The pre-rendered `server/discover` result.
    pub discover: Bytes,
    /// Background work (streamed calls), awaited on shutdown.
    pub tasks: TaskTracker,
    /// Cancelled when the grace period ends: stops all remaining work.
    pub shutdown: CancellationToken,
    /// Cancelled when shutdown begins: readiness turns false.
    pub stopping: CancellationToken,
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// Builds the state of a replica from a validated config.
    pub fn new(config: Config) -> Result<Self, GatewayError> {
        Self::with_tools(config, |_| {})
    }

    /// Builds the state with extra tools, prompts or resources registered after the
    /// configured toolsets (for embedding mcpgate as a library, and for tests).
    pub fn with_tools(config: Config, extra: impl FnOnce(&mut CatalogBuilder)) -> Result<Self, GatewayError> {
        let server_info = Arc::new(Implementation {
            title: Some("mcpgate".to_owned()),
            description: Some("Stateless, horizontally scalable MCP gateway".to_owned()),
            ..Implementation::new("mcpgate", env!("CARGO_PKG_VERSION"))
        });
        let sealer = sealer(&config)?;
        let auth = Authenticator::from_config(&config)?;
        let cache_scope = cache_scope(config.auth.mode);
        let rendering = ListRendering {
            server_info: server_info.clone(),
            ttl_ms: config.server.list_ttl_ms,
            cache_scope,
            legacy_task_support: false,
        };
        let catalog = toolsets::build(&config.toolset, &rendering, extra)?;
        let discover = discover_result(
            &catalog,
            &server_info,
            config.server.instructions.clone(),
            config.server.discover_ttl_ms,
            cache_scope,
        )?;
        let permits = usize::try_from(config.http.max_concurrent_requests).unwrap_or(Semaphore::MAX_PERMITS);
        Ok(Self(Arc::new(Inner {
            origin: OriginPolicy::from_config(&config),
            limiter: Arc::new(Semaphore::new(permits.min(Semaphore::MAX_PERMITS))),
            body_budget: Arc::new(Semaphore::new(
                usize::try_from(config.http.max_buffered_body_bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS),
            )),
            config,
            catalog,
            sealer,
            auth,
            metrics: Arc::new(Metrics::default()),
            server_info,
            discover,
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            stopping: CancellationToken::new(),
        })))
    }

    /// The `cacheScope` of a result whose handler chose `chosen` (unset means private): never
    /// public behind authentication.
    pub fn cache_scope_for(&self, chosen: Option<CacheScope>) -> CacheScope {
        match cache_scope(self.config.auth.mode) {
            CacheScope::Private => CacheScope::Private,
            CacheScope::Public => chosen.unwrap_or(CacheScope::Private),
        }
    }

    /// Interval of SSE keep-alive comments.
    pub fn sse_keepalive(&self) -> Duration {
        Duration::from_secs(self.config.http.sse_keepalive_secs)
    }
}

/// The widest cache scope this replica's results may carry. Results are the same for every
/// caller, but behind authentication a shared cache must not hand them to callers who never
/// authenticated.
fn cache_scope(mode: AuthMode) -> CacheScope {
    match mode {
        AuthMode::None => CacheScope::Public,
        AuthMode::Jwt => CacheScope::Private,
    }
}

fn sealer(config: &Config) -> Result<Sealer, GatewayError> {
    let max = usize::try_from(config.seal.max_bytes).unwrap_or(usize::MAX);
    let ring = if config.seal.keys.is_empty() {
        tracing::warn!(
            "no seal.keys configured: using a random per-process key; legacy session ids will not survive a \
             restart and cannot be shared with other replicas"
        );
        KeyRing::generate("local")
    } else {
        let specs: Vec<&str> = config.seal.keys.iter().map(|k| k.expose()).collect();
        KeyRing::parse(&specs)
    }
    .map_err(|e| GatewayError::Config {
        setting: "seal.keys (MCPGATE_SEAL_KEYS)".to_owned(),
        problem: e.to_string(),
    })?;
    Ok(Sealer::new(ring, max))
}
