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
use mcpgate_protocol::{Era, ErrorObject};
use mcpgate_runtime::task_metrics::TaskMetrics;
use mcpgate_runtime::worker::{WorkerOptions, Workers};
use mcpgate_seal::{AtRest, KeyRing, Sealer};
use mcpgate_store::{AnyStore, MemoryStore, RedisOptions, RedisStore};
use mcpgate_upstream::Federation;

use crate::auth::Authenticator;
use crate::catalog_refresh::{self, CatalogParts};
use crate::config::{AuthMode, Config};
use crate::error::GatewayError;
use crate::http::origin::OriginPolicy;
use crate::mcp::discover_result;
use crate::mcp::principal_slots::PrincipalSlots;
use crate::metrics::Metrics;
use mcpgate_runtime::catalog::{CatalogBuilder, ListRendering, SharedCatalog};
use mcpgate_runtime::toolsets;

/// Shared state of one replica (cheap to clone).
#[derive(Debug, Clone)]
pub struct AppState(Arc<Inner>);

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
    /// This replica's task workers.
    pub workers: Workers,
    /// Legacy `tasks/result` waiters, in all and per principal.
    pub result_waiters: PrincipalSlots,
    /// Open listen streams, in all and per principal.
    pub listeners: PrincipalSlots,
    /// Seals legacy session ids (and requestState).
    pub sealer: Sealer,
    /// Authenticates requests.
    pub auth: Authenticator,
    /// Host/Origin policy.
    pub origin: OriginPolicy,
    /// Counters.
    pub metrics: Arc<Metrics>,
    /// Task events by tool.
    pub task_metrics: Arc<TaskMetrics>,
    /// Concurrency limit.
    pub limiter: Arc<Semaphore>,
    /// Rate limits per caller (counted in the store).
    pub limits: crate::limits::Limits,
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
    /// Builds the state of a replica from a validated config: connects the store (Redis when
    /// `redis_url` is set, memory otherwise) and starts the task workers.
    pub async fn new(config: Config) -> Result<Self, GatewayError> {
        Self::with_tools(config, |_| {}).await
    }

    /// Builds the state with extra tools, prompts or resources registered after the
    /// configured toolsets (for embedding mcpgate as a library, and for tests).
    pub async fn with_tools(config: Config, extra: impl FnOnce(&mut CatalogBuilder)) -> Result<Self, GatewayError> {
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
            legacy_task_support: true,
        };
        let federation =
            Arc::new(Federation::new(config.upstream.clone(), &config.federation.separator).map_err(|e| {
                GatewayError::Startup { what: "configuring upstreams".to_owned(), problem: e.to_string() }
            })?);
        let store = connect_store(&config, &sealer).await?;
        let lists = if federation.is_empty() {
            Vec::new()
        } else {
            let wait = Duration::from_secs(config.federation.startup_wait_secs);
            catalog_refresh::initial_lists(&federation, &store, wait).await
        };
        let mut extra_entries = CatalogBuilder::default();
        extra(&mut extra_entries);
        if config.toolset.is_empty() && config.upstream.is_empty() && extra_entries.is_empty() {
            return Err(crate::config::invalid_key(
                "toolset",
                "at least one toolset (or an upstream, or a tool added in code) is required",
            ));
        }
        let catalog_parts = CatalogParts {
            toolsets: toolsets::registered(&config.toolset)?,
            extra: extra_entries,
            rendering,
            store: store.clone(),
            background: config.background.clone(),
            cancellations: Default::default(),
        };
        let catalog = SharedCatalog::new(catalog_parts.build(&federation, &lists)?);
        let discover = discover_result(
            &catalog.load(),
            &server_info,
            config.server.instructions.clone(),
            config.server.discover_ttl_ms,
            cache_scope,
        )?;
        let permits = usize::try_from(config.http.max_concurrent_requests).unwrap_or(Semaphore::MAX_PERMITS);
        let shutdown = CancellationToken::new();
        let stopping = CancellationToken::new();
        let task_metrics = Arc::new(TaskMetrics::new(catalog.load().task_tools()));
        let _ = catalog_parts.cancellations.set(task_metrics.clone());
        let workers = Workers::start(
            store.clone(),
            catalog.clone(),
            worker_options(&config, task_metrics.clone()),
            Arc::new(|failure| GatewayError::from(failure.clone()).wire(Some(Era::Modern)).error as ErrorObject),
            stopping.clone(),
            shutdown.clone(),
        );
        // Without authentication every caller is the one anonymous principal: only the
        // replica's limits can apply.
        let anonymous = config.auth.mode == AuthMode::None;
        let (tasks, http) = (&config.tasks, &config.http);
        let state = Self(Arc::new(Inner {
            store,
            workers,
            result_waiters: PrincipalSlots::result_waiters(
                tasks.max_result_waiters,
                if anonymous { tasks.max_result_waiters } else { tasks.max_result_waiters_per_principal },
            ),
            listeners: PrincipalSlots::listeners(
                http.max_listeners,
                if anonymous { http.max_listeners } else { http.max_listeners_per_principal },
            ),
            origin: OriginPolicy::from_config(&config),
            limiter: Arc::new(Semaphore::new(permits.min(Semaphore::MAX_PERMITS))),
            limits: crate::limits::Limits::from_config(&config),
            body_budget: Arc::new(Semaphore::new(
                usize::try_from(config.http.max_buffered_body_bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS),
            )),
            config,
            catalog,
            catalog_parts,
            federation,
            sealer,
            auth,
            metrics: Arc::new(Metrics::default()),
            task_metrics,
            server_info,
            discover,
            tasks: TaskTracker::new(),
            shutdown,
            stopping,
        }));
        catalog_refresh::spawn(state.clone(), lists);
        Ok(state)
    }

    /// Whether a task of `tool` keeps its caller's bearer token (sealed in the record): the
    /// tool is an upstream's that exchanges the caller's token on every call, so a run on any
    /// replica needs it. No other task keeps it.
    pub fn keeps_credential(&self, tool: &mcpgate_runtime::catalog::ToolDescriptor) -> bool {
        tool.upstream
            .as_deref()
            .is_some_and(|name| self.config.upstream.iter().any(|u| u.name == name && u.token_exchange.is_some()))
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

async fn connect_store(config: &Config, sealer: &Sealer) -> Result<AnyStore, GatewayError> {
    let shards = u16::try_from(config.store.shards).unwrap_or(16);
    let Some(url) = &config.redis_url else {
        return Ok(AnyStore::Memory(MemoryStore::new(shards)));
    };
    let options = RedisOptions {
        url: url.clone(),
        cluster: config.store.cluster,
        prefix: config.store.prefix.clone(),
        shards,
        pool_size: usize::try_from(config.store.pool_size).unwrap_or(2),
        command_timeout: Duration::from_millis(config.store.command_timeout_ms),
        // Always there to open what was sealed, even once writing sealed values is turned off.
        at_rest: Some(Arc::new(AtRest::new(sealer, config.store.encrypt_at_rest))),
        at_rest_window: Duration::from_secs(config.store.at_rest_window_secs),
    };
    // A replica may start before Redis: keep trying for a while rather than crash-looping.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match RedisStore::connect(options.clone()).await {
            Ok(store) => return Ok(AnyStore::Redis(store)),
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = %e, "cannot reach Redis yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                return Err(GatewayError::Startup { what: "connecting to Redis".to_owned(), problem: e.to_string() });
            }
        }
    }
}

fn worker_options(config: &Config, metrics: Arc<TaskMetrics>) -> WorkerOptions {
    let host = std::fs::read_to_string("/etc/hostname").map(|h| h.trim().to_owned()).unwrap_or_default();
    let host = if host.is_empty() { "replica".to_owned() } else { host };
    let random: u32 = rand_u32();
    WorkerOptions {
        worker_id: format!("{host}-{}-{random:08x}", std::process::id()),
        max_running: usize::try_from(config.tasks.max_running).unwrap_or(256),
        lease: Duration::from_millis(config.tasks.lease_ms),
        max_attempts: u32::try_from(config.tasks.max_attempts).unwrap_or(3),
        read_block: Duration::from_secs(5),
        unknown_tool_grace: Duration::from_secs(config.tasks.unknown_tool_grace_secs),
        metrics,
        count_stored_bytes: config.limits.max_stored_bytes > 0,
        trace_link: crate::telemetry::trace_link(),
    }
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    u32::from_le_bytes(b)
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
