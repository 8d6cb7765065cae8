//! The sections of how a replica serves and is operated: what it says about itself and its
//! call timeout (`[server]`), the HTTP surface's limits (`[http]`), logging (`[log]`), the
//! admin API (`[admin]`), the audit trail (`[audit]`) and graceful shutdown (`[shutdown]`).
//! Each default is declared once, in its `Default` impl.

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use super::secret::Secret;

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
