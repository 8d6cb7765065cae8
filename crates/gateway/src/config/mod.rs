//! The one typed configuration of a replica, with every default declared once (in the
//! `Default` impls below), and how it is loaded and validated.
//!
//! Sources in order, later wins: built-in defaults → TOML file (`--config`) → `MCPGATE_*`
//! environment → command-line flags. Tests build a `Config` directly, or load one from a map
//! of environment values; nothing here reads or writes the process environment itself.

mod cli;
mod connect;
mod load;
mod server;
pub mod settings;
mod suggest;

use std::fmt;
use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use crate::policy::{Effect, PolicyRule};
pub use cli::{Cli, Command};
pub(crate) use load::SEAL_KEYS_ADVICE;
pub use load::{load, load_from_str, load_from_str_with_env, load_with_env, parse_origin};
pub use server::{Discovery, MCP_PATH, VirtualServer};
pub(crate) use settings::invalid_key;

/// Everything a replica needs to start.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Listen address.
    pub listen: SocketAddr,
    /// Redis URL; `None` = embedded single-replica mode.
    pub redis_url: Option<String>,
    /// Toolsets to serve.
    pub toolset: Vec<String>,
    /// What the server says about itself and how long lists may be cached.
    pub server: ServerConfig,
    /// HTTP surface limits and DNS-rebinding protection.
    pub http: HttpConfig,
    /// Authentication.
    pub auth: AuthConfig,
    /// Sealing of session ids and requestState.
    pub seal: SealConfig,
    /// Durable tasks: lifetimes, execution, retries.
    pub tasks: TasksConfig,
    /// Background tools: the companion tools' names and the busy answer.
    pub background: BackgroundConfig,
    /// Rate limits per principal, shared by every replica.
    pub limits: LimitsConfig,
    /// The Redis task store.
    pub store: StoreConfig,
    /// Logging.
    pub log: LogConfig,
    /// Graceful shutdown.
    pub shutdown: ShutdownConfig,
    /// Upstream servers: naming, list refresh, the `mcpServers` import.
    pub federation: FederationConfig,
    /// The admin API (its own listener; off unless `admin.listen` is set).
    pub admin: AdminConfig,
    /// The audit trail (off unless `audit.enabled`).
    pub audit: AuditConfig,
    /// What policy decides when no `[[policy]]` rule holds (`allow` keeps a deployment
    /// without rules as it was).
    pub policy_default: Effect,
    /// Answer a denied use as if the tool, prompt or resource did not exist.
    pub policy_hide_denied: bool,
    /// `[[policy]]` rules, in file order (the first that holds decides). Read apart from the
    /// settings, like `[[upstream]]`: TOML cannot make `policy` both a list of tables and a
    /// table of settings, so the two settings above are top-level keys.
    #[serde(skip)]
    pub policy: Vec<PolicyRule>,
    /// Whether `/mcp` serves (false: it answers 404 and only the virtual servers serve).
    pub root_endpoint: bool,
    /// `[[server]]` tables: virtual servers, each on its own path (read apart from the
    /// settings, like `[[policy]]`).
    #[serde(skip)]
    pub servers: Vec<VirtualServer>,
    /// `[[upstream]]` tables merged with the imported `mcpServers`, `${VAR}` expanded and
    /// validated by [`load`] (their values may be credentials: never serialized).
    #[serde(skip)]
    pub upstream: Vec<mcpgate_upstream::UpstreamConfig>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            redis_url: None,
            toolset: vec!["demo".to_owned()],
            server: ServerConfig::default(),
            http: HttpConfig::default(),
            auth: AuthConfig::default(),
            seal: SealConfig::default(),
            tasks: TasksConfig::default(),
            background: BackgroundConfig::default(),
            limits: LimitsConfig::default(),
            store: StoreConfig::default(),
            log: LogConfig::default(),
            shutdown: ShutdownConfig::default(),
            federation: FederationConfig::default(),
            admin: AdminConfig::default(),
            audit: AuditConfig::default(),
            policy_default: Effect::Allow,
            policy_hide_denied: false,
            policy: Vec::new(),
            root_endpoint: true,
            servers: Vec::new(),
            upstream: Vec::new(),
        }
    }
}

/// Checks the `[[server]]` tables' names and paths (their rules are compiled with their
/// endpoints): a bad or duplicate name, or a path that is not the server's own, is named.
pub(crate) fn validate_servers(config: &Config) -> Result<(), crate::error::StartupError> {
    server::validate(&config.servers, MCP_PATH)
}

/// `[server]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Instructions for the model.
    pub instructions: Option<String>,
    /// `ttlMs` of list results.
    pub list_ttl_ms: u64,
    /// `ttlMs` of `server/discover`.
    pub discover_ttl_ms: u64,
    /// Upper bound on one synchronous call.
    pub tool_timeout_secs: u64,
    /// Where users' browsers reach the gateway (connect links, OAuth callbacks); required with
    /// an `auth = "oauth"` upstream.
    pub public_url: Option<String>,
    /// The gateway's client id at authorization servers that accept Client ID Metadata
    /// Documents: the https URL of that document (default `<public_url>/oauth/client-metadata.json`,
    /// served by the gateway; set it to host the document elsewhere).
    pub client_metadata_url: Option<String>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            instructions: None,
            list_ttl_ms: 60_000,
            discover_ttl_ms: 300_000,
            tool_timeout_secs: 300,
            public_url: None,
            client_metadata_url: None,
        }
    }
}

/// `[http]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Largest body accepted.
    pub body_limit_bytes: u64,
    /// Deadline for receiving a body.
    pub body_timeout_secs: u64,
    /// Body bytes buffered at once across requests.
    pub max_buffered_body_bytes: u64,
    /// Allowed `Origin` values (or `*`).
    pub allowed_origins: Vec<String>,
    /// Allowed `Host` names; empty = loopback names when listening on loopback.
    pub allowed_hosts: Vec<String>,
    /// Concurrency limit per replica.
    pub max_concurrent_requests: u64,
    /// Requests in flight (counting the call) at which a checkpointing synchronous tool call
    /// is handed to another replica; 0 = never.
    pub shed_at_requests: u64,
    /// SSE keep-alive interval.
    pub sse_keepalive_secs: u64,
    /// `subscriptions/listen` streams open at once per replica.
    pub max_listeners: u64,
    /// `subscriptions/listen` streams one principal may hold open on one replica.
    pub max_listeners_per_principal: u64,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            body_limit_bytes: 4 * 1024 * 1024,
            body_timeout_secs: 30,
            max_buffered_body_bytes: 256 * 1024 * 1024,
            allowed_origins: Vec::new(),
            allowed_hosts: Vec::new(),
            max_concurrent_requests: 4096,
            shed_at_requests: 0,
            sse_keepalive_secs: 15,
            max_listeners: 10_000,
            max_listeners_per_principal: 16,
        }
    }
}

/// How callers are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Everyone is one anonymous principal (local development).
    #[default]
    None,
    /// Bearer JWTs.
    Jwt,
}

/// `[auth]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Mode.
    pub mode: AuthMode,
    /// Allow `none` on a public address.
    pub allow_anonymous_non_loopback: bool,
    /// Canonical resource URI of this endpoint.
    pub resource: Option<String>,
    /// Authorization servers for the protected resource metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes advertised.
    pub scopes_supported: Vec<String>,
    /// Scopes required on every token.
    pub required_scopes: Vec<String>,
    /// JWT verification.
    pub jwt: JwtConfig,
    /// How a user opening a connect link proves, at `auth.jwt.issuer`, who they are.
    pub browser_login: BrowserLoginConfig,
}

/// `[auth.browser_login]`: the gateway as an OpenID Connect client of its own issuer
/// (`auth.jwt.issuer`), so whoever opens a connect link signs in there first and is refused
/// unless they are the principal the link was made for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserLoginConfig {
    /// The gateway's client id at its issuer.
    pub client_id: Option<String>,
    /// Its secret (unset: a public client).
    pub client_secret: Option<Secret>,
    /// Scopes asked for at sign-in.
    pub scopes: Vec<String>,
    /// Whether the sign-in is required. Off, whoever opens a link connects *their* account to
    /// the principal the link was made for.
    pub verify_user: bool,
}

impl Default for BrowserLoginConfig {
    fn default() -> Self {
        Self { client_id: None, client_secret: None, scopes: vec!["openid".to_owned()], verify_user: true }
    }
}

/// `[auth.jwt]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// Required issuer.
    pub issuer: Option<String>,
    /// Required audience (defaults to `auth.resource`).
    pub audience: Option<String>,
    /// Algorithm allow-list.
    pub algorithms: Vec<String>,
    /// HS256 secrets.
    pub hs256_secrets: Vec<Secret>,
    /// PEM public key files (`path` or `kid=path`).
    pub public_key_files: Vec<String>,
    /// JWKS file.
    pub jwks_file: Option<String>,
    /// JWKS URL.
    pub jwks_url: Option<String>,
    /// Clock skew allowance.
    pub leeway_secs: u64,
    /// Minimum interval between JWKS refreshes.
    pub jwks_refresh_min_secs: u64,
    /// JWKS cache lifetime.
    pub jwks_cache_secs: u64,
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            issuer: None,
            audience: None,
            algorithms: vec!["RS256".to_owned(), "ES256".to_owned(), "EdDSA".to_owned()],
            hs256_secrets: Vec::new(),
            public_key_files: Vec::new(),
            jwks_file: None,
            jwks_url: None,
            leeway_secs: 30,
            jwks_refresh_min_secs: 30,
            jwks_cache_secs: 600,
        }
    }
}

/// `[seal]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SealConfig {
    /// `kid:base64` keys; empty = one random key.
    pub keys: Vec<Secret>,
    /// Session id lifetime.
    pub session_ttl_secs: u64,
    /// requestState lifetime.
    pub request_state_ttl_secs: u64,
    /// Refuse a requestState presented a second time (records each one used in the store).
    pub request_state_single_use: bool,
    /// Longest sealed value.
    pub max_bytes: u64,
}

impl Default for SealConfig {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            session_ttl_secs: 86_400,
            request_state_ttl_secs: 600,
            request_state_single_use: false,
            max_bytes: mcpgate_seal::DEFAULT_MAX_TOKEN_LEN as u64,
        }
    }
}

/// `[tasks]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// Lifetime of a task when the client asks for none.
    pub default_ttl_ms: u64,
    /// Longest lifetime granted; longer requests are clamped.
    pub max_ttl_ms: u64,
    /// Whether a client may ask for an unlimited lifetime.
    pub allow_unlimited_ttl: bool,
    /// Suggested poll interval.
    pub poll_interval_ms: u64,
    /// How long a 2026-07-28 call whose task runs on this replica waits for the run to end,
    /// to answer with its outcome instead of the task (0: always answer with the task).
    pub answer_within_ms: u64,
    /// How long a retried call is recognised as the same call.
    pub idempotency_window_ms: u64,
    /// Largest single answer to an input request (`tasks/update`, a legacy response).
    pub max_answer_bytes: u64,
    /// Most bytes of answers one task may collect over all its rounds.
    pub max_task_answer_bytes: u64,
    /// How long a task whose tool no replica knows is passed between replicas before it fails.
    pub unknown_tool_grace_secs: u64,
    /// Tasks run at once per replica.
    pub max_running: u64,
    /// Lease length (renewed every third of it).
    pub lease_ms: u64,
    /// Executions started per task before it fails.
    pub max_attempts: u64,
    /// Legacy `tasks/result` requests waiting at once per replica.
    pub max_result_waiters: u64,
    /// Of those, how many one authenticated principal may hold.
    pub max_result_waiters_per_principal: u64,
    /// Whom a task belongs to under `auth.mode = none`.
    pub anonymous_scope: AnonymousScope,
}

/// Whom a task belongs to when every caller is the one anonymous principal
/// (`auth.mode = none`); with real principals a task is always its principal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnonymousScope {
    /// A task created in a legacy session is seen only in that session (2025-11-25 clients);
    /// requests without a session (2026-07-28) share the server's scope.
    #[default]
    Session,
    /// Every anonymous caller sees every task (one trusted user, e.g. on a laptop).
    Server,
}

/// `[background]`: what a client that knows no tasks uses to follow a background tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackgroundConfig {
    /// Name of the companion tool that reports a background task's status.
    pub status_tool: String,
    /// Name of the companion tool that returns a background task's result.
    pub result_tool: String,
    /// Name of the companion tool that cancels a background task.
    pub cancel_tool: String,
    /// Retry advice of the busy answer given while this replica's task workers are all taken.
    pub busy_retry_secs: u64,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        Self {
            status_tool: "task_status".to_owned(),
            result_tool: "task_result".to_owned(),
            cancel_tool: "task_cancel".to_owned(),
            busy_retry_secs: 5,
        }
    }
}

/// `[limits]`: rate limits and task quotas per principal (and per principal and upstream),
/// counted in the store so they hold across every replica. A rate of 0 is no limit; a burst of 0 is ten
/// seconds' worth of the rate (at least 1).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// `tools/call` requests a minute per principal.
    pub calls_per_minute: u64,
    /// Calls admitted at once.
    pub calls_burst: u64,
    /// Task creations a minute per principal.
    pub tasks_per_minute: u64,
    /// Task creations admitted at once.
    pub tasks_burst: u64,
    /// `tasks/get` polls a minute per principal: past the burst a poll is still answered,
    /// with a longer poll interval saying when to poll next; only a client polling twice as fast
    /// as that is refused.
    pub polls_per_minute: u64,
    /// Polls admitted at once before the advice starts.
    pub polls_burst: u64,
    /// Calls a minute per principal to one upstream's tools (an upstream's own
    /// `limits.calls_per_minute` overrides it).
    pub upstream_calls_per_minute: u64,
    /// Task creations a minute per principal for one upstream's tools (an upstream's own
    /// `limits.tasks_per_minute` overrides it).
    pub upstream_tasks_per_minute: u64,
    /// Tasks of one principal running at once (working or waiting for input), across every
    /// replica; a creation beyond it is refused.
    pub max_running_tasks: u64,
    /// Tasks of one principal retained at once (any status, until they expire).
    pub max_retained_tasks: u64,
    /// Bytes one principal's retained tasks may hold: arguments, answers and state given at
    /// creation, and results once recorded.
    pub max_stored_bytes: u64,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            default_ttl_ms: 3_600_000,
            max_ttl_ms: 86_400_000,
            allow_unlimited_ttl: false,
            poll_interval_ms: 1_000,
            answer_within_ms: 50,
            idempotency_window_ms: 300_000,
            max_answer_bytes: 1_048_576,
            max_task_answer_bytes: 4_194_304,
            unknown_tool_grace_secs: 300,
            max_running: 256,
            lease_ms: 30_000,
            max_attempts: 3,
            max_result_waiters: 10_000,
            max_result_waiters_per_principal: 64,
            anonymous_scope: AnonymousScope::Session,
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Prefix of every Redis key.
    pub prefix: String,
    /// Shards (job streams); the same on every replica.
    pub shards: u64,
    /// Redis connections, each shared by all concurrent calls (multiplexed).
    pub pool_size: u64,
    /// Bound on every Redis call.
    pub command_timeout_ms: u64,
    /// `redis_url` names a Redis Cluster (one or more seed nodes, comma-separated).
    pub cluster: bool,
    /// Task arguments, answers, state and results are sealed in Redis with the seal keys.
    pub encrypt_at_rest: bool,
    /// With `encrypt_at_rest`: for how long after the first replica started with it tasks
    /// may still be created holding plain (or older-format) payloads; later ones are refused
    /// them.
    pub at_rest_window_secs: u64,
    /// Redis replicas that must hold each write a client or a worker relies on (task writes,
    /// vault writes and deletes, single-use marks) before it is answered (`WAIT`); 0 = answer
    /// once the primary has it (a failover may lose it).
    pub replicas_ack: u64,
    /// How long a write waits for those replicas; below `command_timeout_ms`.
    pub replicas_ack_timeout_ms: u64,
    /// `[store.sentinel]`: find the Redis primary through Sentinel (instead of `redis_url`).
    pub sentinel: Option<SentinelConfig>,
    /// A PEM bundle of the CAs that TLS connections to Redis trust instead of the system
    /// roots (a private CA); `None` = the system roots.
    pub tls_ca_file: Option<String>,
    /// Finished task records each replica keeps to answer `tasks/get` without a round trip
    /// (0 = none); dropped when purged on any replica or expired.
    pub terminal_cache_entries: u64,
    /// Bytes those records may take.
    pub terminal_cache_bytes: u64,
    /// A finished record larger than this (e.g. a big result) is not kept.
    pub terminal_cache_record_bytes: u64,
}

/// `[store.sentinel]`: the Sentinel set that names the Redis primary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentinelConfig {
    /// The name the sentinels monitor the primary under (required).
    pub master_name: String,
    /// The sentinels, `host:port` each (at least one).
    pub addresses: Vec<String>,
    /// TLS to the sentinels and the data nodes.
    pub tls: bool,
    /// The data nodes' ACL user.
    pub username: Option<String>,
    /// The data nodes' password.
    pub password: Option<Secret>,
    /// The sentinels' ACL user.
    pub sentinel_username: Option<String>,
    /// The sentinels' password.
    pub sentinel_password: Option<Secret>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            prefix: "mcpgate".to_owned(),
            shards: 16,
            pool_size: 2,
            command_timeout_ms: 2_000,
            cluster: false,
            encrypt_at_rest: true,
            at_rest_window_secs: 900,
            replicas_ack: 0,
            replicas_ack_timeout_ms: 1_000,
            sentinel: None,
            tls_ca_file: None,
            terminal_cache_entries: 10_000,
            terminal_cache_bytes: 64 << 20,
            terminal_cache_record_bytes: 64 << 10,
        }
    }
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// `[log]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// Format.
    pub format: LogFormat,
    /// Filter directive.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        Self { format: LogFormat::Text, level: "info".to_owned() }
    }
}

/// `[admin]`: the operator's API, on a listener of its own.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Where the admin API listens; `None` = no admin API.
    pub listen: Option<SocketAddr>,
    /// The bearer token every admin request must present (at least 32 characters).
    pub token: Option<Secret>,
    /// Whether inspecting a task shows its payloads (arguments, answers, state, result).
    pub show_payloads: bool,
    /// Whether `/metrics` and `/upstreams` are served only here, not on the MCP listener.
    pub private_metrics: bool,
}

/// Where audit lines go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuditSink {
    /// Standard output, one JSON object per line (beside the `listening on` line).
    #[default]
    Stdout,
    /// A file (`audit.path`), appended to.
    File,
}

/// `[audit]`: one JSON line per request that reaches a tool, prompt or resource and per task
/// transition (see docs/audit.md).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuditConfig {
    /// Whether the trail is written at all.
    pub enabled: bool,
    /// Where it goes.
    pub sink: AuditSink,
    /// The file of `sink = "file"`.
    pub path: Option<String>,
    /// Whether call arguments are in the lines (never results).
    pub include_arguments: bool,
}

/// `[shutdown]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ShutdownConfig {
    /// Time between "not ready" and closing the listener.
    pub drain_secs: u64,
    /// Grace period for in-flight requests.
    pub grace_secs: u64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        Self { drain_secs: 0, grace_secs: 20 }
    }
}

/// `[federation]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FederationConfig {
    /// Between the upstream name and its tool or prompt name.
    pub separator: String,
    /// Re-read upstream lists this often.
    pub list_refresh_secs: u64,
    /// A Claude-Desktop-style JSON file whose `mcpServers` become upstreams.
    pub mcp_servers_file: Option<String>,
    /// The environment variables that file's `${VAR}`s may name (it may be a third party's:
    /// no other variable of the replica's environment is expanded into it).
    pub import_env: Vec<String>,
    /// How long start-up waits for the upstreams' lists.
    pub startup_wait_secs: u64,
}

impl Default for FederationConfig {
    fn default() -> Self {
        Self {
            separator: "_".to_owned(),
            list_refresh_secs: 60,
            mcp_servers_file: None,
            import_env: Vec::new(),
            startup_wait_secs: 30,
        }
    }
}

/// A secret string: serialized as itself, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value; call sites are the only places it is visible.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl Config {
    /// Loads a configuration from TOML text (defaults for everything else), validated.
    pub fn from_toml(text: &str) -> Result<Self, crate::error::StartupError> {
        load::load_from_str(text)
    }

    /// Checks what the types alone cannot (for a config built in code; loaded ones are
    /// checked already): consistent auth, seal keys in multi-replica mode, bounds.
    pub fn validate(&self) -> Result<(), crate::error::StartupError> {
        load::validate(self)
    }

    /// Whether the listen address is a loopback address.
    pub fn listens_on_loopback(&self) -> bool {
        self.listen.ip().is_loopback()
    }

    /// Whether several replicas share state (a Redis URL or a Sentinel set is configured).
    pub fn is_multi_replica(&self) -> bool {
        self.redis_url.is_some() || self.store.sentinel.is_some()
    }
}
