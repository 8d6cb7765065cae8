//! The one typed configuration of a replica, with every default declared once (in the
//! `Default` impls of its sections), and how it is loaded and validated.
//!
//! Sources in order, later wins: built-in defaults → TOML file (`--config`) → `MCPGATE_*`
//! environment → command-line flags. Tests build a `Config` directly, or load one from a map
//! of environment values; nothing here reads or writes the process environment itself.
//!
//! Rooms: this file holds `Config` (the whole); `serving`, `auth`, `execution` and `store` the
//! sections' types, `secret` the type of a secret value; `settings` the registry of every
//! setting; `cli` the flags; `load` the layering of the sources, `upstreams` the
//! `[[upstream]]` tables and the `mcpServers` import, `validate` (with `connect` and `server`)
//! what the types alone cannot check; `suggest` the hints for unknown keys.

mod auth;
mod cli;
mod connect;
mod execution;
mod load;
mod secret;
mod server;
mod serving;
pub mod settings;
mod store;
mod suggest;
mod upstreams;
mod validate;

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

pub use crate::policy::{Effect, PolicyRule};
pub use auth::{AuthConfig, AuthMode, BrowserLoginConfig, JwtConfig, SealConfig};
pub use cli::{Cli, Command};
pub use execution::{AnonymousScope, BackgroundConfig, FederationConfig, LimitsConfig, TasksConfig};
pub use load::{load, load_from_str, load_from_str_with_env, load_with_env};
pub use secret::Secret;
pub use server::{Discovery, MCP_PATH, VirtualServer};
pub use serving::{
    AdminConfig, AuditConfig, AuditSink, HttpConfig, LogConfig, LogFormat, ServerConfig, ShutdownConfig,
};
pub(crate) use settings::invalid_key;
pub use store::{SentinelConfig, StoreConfig};
pub(crate) use validate::SEAL_KEYS_ADVICE;
pub use validate::parse_origin;

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

impl Config {
    /// Loads a configuration from TOML text (defaults for everything else), validated.
    pub fn from_toml(text: &str) -> Result<Self, crate::error::StartupError> {
        load::load_from_str(text)
    }

    /// Checks what the types alone cannot (for a config built in code; loaded ones are
    /// checked already): consistent auth, seal keys in multi-replica mode, bounds.
    pub fn validate(&self) -> Result<(), crate::error::StartupError> {
        validate::validate(self)
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
