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

use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::catalog::SharedCatalog;
use mcpgate_runtime::worker::Workers;
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

/// The contents of [`AppState`]. Its fields are the crate's own: what a program built on the
/// library, and the tests, may read or use is named by [`AppState`]'s accessors.
#[derive(Debug)]
pub struct Inner {
    /// The validated configuration.
    pub(crate) config: Config,
    /// Tools, prompts and resources: the current snapshot.
    pub(crate) catalog: SharedCatalog,
    /// What each new snapshot is built from.
    pub(crate) catalog_parts: CatalogParts,
    /// The upstream servers behind this replica.
    pub(crate) federation: Arc<Federation>,
    /// Tasks, their job queue and events.
    pub(crate) store: AnyStore,
    /// Creates, finds and cancels tasks; holds this replica's task workers and counters.
    pub(crate) tasks: TaskService,
    /// Legacy `tasks/result` waiters, in all and per principal.
    pub(crate) result_waiters: PrincipalSlots,
    /// Open listen streams, in all and per principal.
    pub(crate) listeners: PrincipalSlots,
    /// Which tools of pinned upstreams the snapshots withhold (see `pinning`).
    pub(crate) pinning: Arc<crate::pinning::Pinning>,
    /// Users' connections to `auth = "oauth"` upstreams (`None` without any).
    pub(crate) connections: Option<Arc<Connector>>,
    /// Seals legacy session ids (and requestState).
    pub(crate) sealer: Sealer,
    /// Authenticates requests.
    pub(crate) auth: Authenticator,
    /// Host/Origin policy.
    pub(crate) origin: OriginPolicy,
    /// Counters.
    pub(crate) metrics: Arc<Metrics>,
    /// The audit trail (off unless `audit.enabled`).
    pub(crate) audit: crate::audit::Audit,
    /// Concurrency limit.
    pub(crate) limiter: Arc<Semaphore>,
    /// Rate limits per caller (counted in the store).
    pub(crate) limits: Arc<Limits>,
    /// The root endpoint and the virtual servers: what each serves, under which rules.
    pub(crate) endpoints: Endpoints,
    /// Bytes of request bodies that may be buffered at once (one permit per byte).
    pub(crate) body_budget: Arc<Semaphore>,
    /// Work that outlives its request's handler (streamed calls, listen streams), awaited on
    /// shutdown.
    pub(crate) in_flight: TaskTracker,
    /// Cancelled when the grace period ends: stops all remaining work.
    pub(crate) shutdown: CancellationToken,
    /// Cancelled when shutdown begins: readiness turns false.
    pub(crate) stopping: CancellationToken,
    /// Who this replica is in the fleet's heartbeats (see `heartbeat`).
    pub(crate) member: crate::member::Member,
}

impl Deref for AppState {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.0
    }
}

impl AppState {
    /// The validated configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The task store (memory or Redis).
    pub fn store(&self) -> &AnyStore {
        &self.store
    }

    /// This replica's task workers (how many runs they hold, whether all are taken).
    pub fn workers(&self) -> &Workers {
        self.tasks.workers()
    }

    /// The sealer of legacy session ids and requestState (a program minting its own session
    /// ids seals them with it).
    pub fn sealer(&self) -> &Sealer {
        &self.sealer
    }

    /// Legacy `tasks/result` requests waiting on this replica now.
    pub fn result_waiters_held(&self) -> usize {
        self.result_waiters.held()
    }

    /// Cancelled when the grace period ends: stops all remaining work (cancel it to stop at
    /// once).
    pub fn shutdown(&self) -> &CancellationToken {
        &self.shutdown
    }

    /// Cancelled when shutdown begins: readiness turns false (cancel it to start draining).
    pub fn stopping(&self) -> &CancellationToken {
        &self.stopping
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
pub(crate) fn cache_scope(mode: AuthMode) -> CacheScope {
    match mode {
        AuthMode::None => CacheScope::Public,
        AuthMode::Jwt => CacheScope::Private,
    }
}
