//! Starting a replica: building its [`AppState`] from a validated config — the sealer, the
//! authenticator, the store connection (waiting for Redis a while), the upstreams' first
//! lists, the catalog, the task workers and service — and starting the catalog refresh loop
//! (and, with Redis, checking the seal keys against the fleet's: `fleet_keys`).
//!
//! Invariant: a replica serves only once all of this stands; any part that cannot be built is
//! a start-up error naming what failed (the task workers start only after everything that can
//! fail has been built).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use mcpgate_protocol::Era;
use mcpgate_protocol::ErrorObject;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_runtime::catalog::{CatalogBuilder, ListRendering, SharedCatalog};
use mcpgate_runtime::task_metrics::TaskMetrics;
use mcpgate_runtime::toolsets;
use mcpgate_runtime::worker::{WorkerOptions, Workers};
use mcpgate_seal::{AtRest, KeyRing, Sealer};
use mcpgate_store::{AnyStore, MemoryStore, RedisOptions, RedisStore, SentinelOptions, TerminalCacheLimits};
use mcpgate_upstream::Federation;

use crate::audit::Audit;
use crate::auth::Authenticator;
use crate::catalog_parts::CatalogParts;
use crate::catalog_refresh;
use crate::config::{AuthMode, Config, invalid_key};
use crate::connections::Connector;
use crate::error::{GatewayError, StartupError};
use crate::limits::Limits;
use crate::metrics::Metrics;
use crate::origin::OriginPolicy;
use crate::principal_slots::PrincipalSlots;
use crate::servers::Endpoints;
use crate::state::{AppState, Inner, cache_scope};
use crate::tasks::{TaskBook, TaskService};

impl AppState {
    /// Builds the state of a replica from a validated config: connects the store (Redis when
    /// `redis_url` or `store.sentinel` is set, memory otherwise) and starts the task workers.
    pub async fn new(config: Config) -> Result<Self, StartupError> {
        Self::with_tools(config, |_| {}).await
    }

    /// Builds the state with extra tools, prompts or resources registered after the
    /// configured toolsets (for embedding mcpgate as a library, and for tests).
    pub async fn with_tools(config: Config, extra: impl FnOnce(&mut CatalogBuilder)) -> Result<Self, StartupError> {
        let server_info = Arc::new(Implementation {
            title: Some("mcpgate".to_owned()),
            description: Some("Stateless, horizontally scalable MCP gateway".to_owned()),
            ..Implementation::new("mcpgate", env!("CARGO_PKG_VERSION"))
        });
        // Tests and library users build a `Config` without `load`: servers and rules are
        // checked here too, before anything is started.
        crate::config::validate_servers(&config)?;
        crate::policy::Policy::from_rules(&config.policy, config.policy_default, config.policy_hide_denied)?;
        let sealer = sealer(&config)?;
        let server_resources: Vec<String> = crate::servers::public_origin(&config)
            .map(|origin| config.servers.iter().map(|s| format!("{origin}{}", s.endpoint_path())).collect())
            .unwrap_or_default();
        let auth = Authenticator::from_config(&config, &server_resources)?;
        let cache_scope = cache_scope(config.auth.mode);
        let rendering = ListRendering {
            server_info: server_info.clone(),
            ttl_ms: config.server.list_ttl_ms,
            cache_scope,
            legacy_task_support: true,
        };
        let federation = Arc::new(
            Federation::new(config.upstream.clone(), &config.federation.separator)
                .map_err(|e| StartupError::step_caused("configuring upstreams", "an upstream cannot be set up", e))?,
        );
        let store = connect_store(&config, &sealer).await?;
        // Before anything is served: a replica whose keys cannot open what the fleet seals
        // would answer its tokens and tasks with errors.
        let ring_record = format!("{}-{:08x}", std::process::id(), rand_u32());
        crate::fleet_keys::check(&store, &ring_record, sealer.ring(), &config.store.prefix).await?;
        let connections = Connector::from_config(&config, store.clone(), &sealer)?;
        if let Some(connector) = &connections {
            federation.set_connections(connector.seam());
        }
        let lists = if federation.is_empty() {
            Vec::new()
        } else {
            let wait = Duration::from_secs(config.federation.startup_wait_secs);
            catalog_refresh::initial_lists(&federation, &store, wait).await
        };
        // Pinned upstreams' tools are checked against the store before anything is served.
        let pinning = Arc::new(crate::pinning::Pinning::default());
        let served = pinning.served(&store, &federation, &lists).await;
        let mut extra_entries = CatalogBuilder::default();
        extra(&mut extra_entries);
        if config.toolset.is_empty() && config.upstream.is_empty() && extra_entries.is_empty() {
            return Err(invalid_key(
                "toolset",
                "at least one toolset (or an upstream, or a tool added in code) is required",
            ));
        }
        let catalog_parts = CatalogParts {
            toolsets: toolsets::registered(&config.toolset)?,
            extra: extra_entries,
            rendering,
            background: config.background.clone(),
        };
        // Counted by the tools that may run as tasks at start-up (the companions never do).
        let task_metrics = Arc::new(TaskMetrics::new(catalog_parts.assemble(&federation, &served).task_tools()));
        let options = worker_options(&config, task_metrics.clone());
        let audit = Audit::start(&config.audit, &options.worker_id)?;
        let book = TaskBook::new(store.clone(), task_metrics).with_transitions(audit.observer());
        let catalog = SharedCatalog::new(catalog_parts.build(&federation, &served, &book)?);
        audit.attach_catalog(&catalog);
        let origin = crate::servers::public_origin(&config);
        let rendering = crate::servers::Rendering {
            catalog: &catalog.load(),
            ttl_ms: config.server.discover_ttl_ms,
            cache_scope,
            origin: origin.as_deref(),
        };
        let endpoints = Endpoints::build(&config, server_info.clone(), &rendering)?;
        let permits = usize::try_from(config.http.max_concurrent_requests).unwrap_or(Semaphore::MAX_PERMITS);
        let shutdown = CancellationToken::new();
        let stopping = CancellationToken::new();
        let in_flight = TaskTracker::new();
        let member = crate::member::Member::new(ring_record.clone(), &config);
        crate::fleet_keys::keep_recorded(store.clone(), ring_record, sealer.ring(), stopping.clone(), &in_flight);
        let workers = Workers::start(
            store.clone(),
            catalog.clone(),
            WorkerOptions { transitions: audit.observer(), ..options },
            Arc::new(|failure| GatewayError::from(failure.clone()).wire(Some(Era::Modern)).error as ErrorObject),
            stopping.clone(),
            shutdown.clone(),
        );
        // Without authentication every caller is the one anonymous principal: only the
        // replica's limits can apply.
        let anonymous = config.auth.mode == AuthMode::None;
        let metrics = Arc::new(Metrics::default());
        let limits = Arc::new(Limits::new(&config, store.clone(), metrics.clone()));
        let task_service = TaskService::new(&config, book, store.clone(), workers, limits.clone());
        let (tasks, http) = (&config.tasks, &config.http);
        let state = Self(Arc::new(Inner {
            store,
            tasks: task_service,
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
            limits,
            endpoints,
            body_budget: Arc::new(Semaphore::new(
                usize::try_from(config.http.max_buffered_body_bytes).unwrap_or(usize::MAX).min(Semaphore::MAX_PERMITS),
            )),
            config,
            catalog,
            catalog_parts,
            federation,
            pinning,
            connections,
            sealer,
            auth,
            metrics,
            audit,
            in_flight,
            shutdown,
            stopping,
            member,
        }));
        catalog_refresh::spawn(state.clone(), lists);
        crate::heartbeat::spawn(state.clone());
        Ok(state)
    }
}

async fn connect_store(config: &Config, sealer: &Sealer) -> Result<AnyStore, StartupError> {
    let shards = u16::try_from(config.store.shards).unwrap_or(16);
    if !config.is_multi_replica() {
        return Ok(AnyStore::Memory(MemoryStore::new(shards)));
    }
    let sentinel = config.store.sentinel.as_ref().map(|s| SentinelOptions {
        addresses: s.addresses.clone(),
        master_name: s.master_name.clone(),
        tls: s.tls,
        username: s.username.clone(),
        password: s.password.as_ref().map(|p| p.expose().to_owned()),
        sentinel_username: s.sentinel_username.clone(),
        sentinel_password: s.sentinel_password.as_ref().map(|p| p.expose().to_owned()),
    });
    // Checked readable when the configuration was validated; read once, here.
    let tls_ca_pem = config
        .store
        .tls_ca_file
        .as_ref()
        .map(std::fs::read)
        .transpose()
        .map_err(|e| StartupError::step_caused("reading store.tls_ca_file", "cannot read the CA bundle", e))?;
    let options = RedisOptions {
        // Empty with Sentinel (exclusive with redis_url): the sentinels name the server.
        url: config.redis_url.clone().unwrap_or_default(),
        sentinel,
        cluster: config.store.cluster,
        prefix: config.store.prefix.clone(),
        shards,
        pool_size: usize::try_from(config.store.pool_size).unwrap_or(2),
        command_timeout: Duration::from_millis(config.store.command_timeout_ms),
        // Always there to open what was sealed, even once writing sealed values is turned off.
        at_rest: Some(Arc::new(AtRest::new(sealer, config.store.encrypt_at_rest))),
        at_rest_window: Duration::from_secs(config.store.at_rest_window_secs),
        replicas_ack: u32::try_from(config.store.replicas_ack).unwrap_or(u32::MAX),
        replicas_ack_timeout: Duration::from_millis(config.store.replicas_ack_timeout_ms),
        tls_ca_pem,
    };
    // A replica may start before Redis: keep trying for a while rather than crash-looping.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        match RedisStore::connect(options.clone()).await {
            Ok(store) => {
                let bytes = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                store.set_terminal_cache(TerminalCacheLimits {
                    entries: bytes(config.store.terminal_cache_entries),
                    bytes: bytes(config.store.terminal_cache_bytes),
                    record_bytes: bytes(config.store.terminal_cache_record_bytes),
                });
                return Ok(AnyStore::Redis(store));
            }
            Err(e) if tokio::time::Instant::now() < deadline => {
                tracing::warn!(error = &e as &dyn std::error::Error, "cannot reach Redis yet; retrying");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(e) => {
                return Err(StartupError::step_caused("connecting to Redis", "still unreachable after 30 s", e));
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
        transitions: None,
    }
}

fn rand_u32() -> u32 {
    let mut b = [0u8; 4];
    let _ = getrandom::fill(&mut b);
    u32::from_le_bytes(b)
}

fn sealer(config: &Config) -> Result<Sealer, StartupError> {
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
    .map_err(|e| StartupError::config_caused("seal.keys (MCPGATE_SEAL_KEYS)", crate::config::SEAL_KEYS_ADVICE, e))?;
    Ok(Sealer::new(ring, max))
}
