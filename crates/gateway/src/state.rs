//! `AppState`: everything a replica shares across requests. It is data: `startup` builds it
//! once from the config.
//!
//! Invariant: nothing in here changes per request or remembers a client; the only mutable
//! parts are counters, the concurrency limiter and the shutdown signals.

use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::catalog::SharedCatalog;
use mcpgate_seal::Sealer;
use mcpgate_store::AnyStore;
use mcpgate_upstream::Federation;

use crate::auth::Authenticator;
use crate::catalog_parts::CatalogParts;
use crate::config::{AuthMode, Config};
use crate::connections::Connector;
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::origin::OriginPolicy;
use crate::principal_slots::PrincipalSlots;
use crate::servers::Endpoints;
use crate::tasks::TaskService;

/// Shared state of one replica (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState(pub(crate) Arc<Inner>);

/// The contents of [`AppState`].
#[derive(Debug)]
pub struct Inner {
    /// The validated configuration.
    pub config: Config,
    /// Tools, prompts and resources: the current snapshot.
    pub catalog: SharedCatalog,
    /// What each new snapshot is built from.
    pub catalog_parts: CatalogParts,
    /// The upstream servers behind this replica.
    pub federation: Arc<Federation>,
    /// Tasks, their job queue and events.
    pub store: AnyStore,
    /// Creates, finds and cancels tasks; holds this replica's task workers and counters.
    pub tasks: TaskService,
    /// Legacy `tasks/result` waiters, in all and per principal.
    pub result_waiters: PrincipalSlots,
    /// Open listen streams, in all and per principal.
    pub listeners: PrincipalSlots,
    /// Which tools of pinned upstreams the snapshots withhold (see `pinning`).
    pub(crate) pinning: Arc<crate::pinning::Pinning>,
    /// Users' connections to `auth = "oauth"` upstreams (`None` without any).
    pub(crate) connections: Option<Arc<Connector>>,
    /// Seals legacy session ids (and requestState).
    pub sealer: Sealer,
    /// Authenticates requests.
    pub auth: Authenticator,
    /// Host/Origin policy.
    pub origin: OriginPolicy,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// The audit trail (off unless `audit.enabled`).
    pub audit: crate::audit::Audit,
    /// Concurrency limit.
    pub limiter: Arc<Semaphore>,
    /// Rate limits per caller (counted in the store).
    pub limits: Arc<Limits>,
    /// The root endpoint and the virtual servers: what each serves, under which rules.
    pub endpoints: Endpoints,
    /// Bytes of request bodies that may be buffered at once (one permit per byte).
    pub body_budget: Arc<Semaphore>,
    /// The root endpoint's `serverInfo`.
    pub server_info: Arc<Implementation>,
    /// Work that outlives its request's handler (streamed calls, listen streams), awaited on
    /// shutdown.
    pub in_flight: TaskTracker,
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
pub(crate) fn cache_scope(mode: AuthMode) -> CacheScope {
    match mode {
        AuthMode::None => CacheScope::Public,
        AuthMode::Jwt => CacheScope::Private,
    }
}
