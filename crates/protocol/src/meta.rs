//! Per-request `_meta` (the 2026-07-28 replacement for `initialize`), progress tokens and
//! log levels.
//!
//! Invariant: the typed fields are exactly the reserved keys the gateway acts on; any other
//! key a client sends is ignored rather than rejected.

use serde::{Deserialize, Serialize};

use crate::capabilities::ClientCapabilities;
use crate::implementation::Implementation;

/// `_meta` key: protocol version of this request.
pub const PROTOCOL_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key: client capabilities of this request.
pub const CLIENT_CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key: client implementation info.
pub const CLIENT_INFO_KEY: &str = "io.modelcontextprotocol/clientInfo";
/// `_meta` key: requested log level for this request.
pub const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key: server implementation info.
pub const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
/// `_meta` key (mcpgate's own): the idempotency key of a task-creating call, for clients that
/// cannot set the `Idempotency-Key` header.
pub const IDEMPOTENCY_KEY: &str = "io.mcpgate/idempotencyKey";
/// Result `_meta` key: the task a 2026-07-28 `tools/call` created and was answered with the
/// result of (the server ran the call as a task that ended at once).
pub const TASK_ID_KEY: &str = "io.mcpgate/taskId";
/// Legacy `_meta` key tying a message to a task.
pub const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";

/// The `_meta` object of a client request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestMeta {
    /// Required on modern requests; its presence is what makes a request modern.
    #[serde(rename = "io.modelcontextprotocol/protocolVersion", default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// Required on modern requests; `{}` declares nothing optional.
    #[serde(rename = "io.modelcontextprotocol/clientCapabilities", default, skip_serializing_if = "Option::is_none")]
    pub client_capabilities: Option<ClientCapabilities>,
    /// Informational only; never used for decisions.
    #[serde(rename = "io.modelcontextprotocol/clientInfo", default, skip_serializing_if = "Option::is_none")]
    pub client_info: Option<Implementation>,
    /// Opt-in to `notifications/message` for this request.
    #[serde(rename = "io.modelcontextprotocol/logLevel", default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<LoggingLevel>,
    /// Opt-in to `notifications/progress` for this request.
    #[serde(rename = "progressToken", default, skip_serializing_if = "Option::is_none")]
    pub progress_token: Option<ProgressToken>,
    /// Deduplicates task creation (like the `Idempotency-Key` header).
    #[serde(rename = "io.mcpgate/idempotencyKey", default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// An opaque progress token: a string or an integer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ProgressToken {
    /// Integer token.
    Number(i64),
    /// String token.
    String(String),
}

/// Syslog-style severity of a log message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[allow(missing_docs)]
pub enum LoggingLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// `notifications/progress` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressParams {
    /// The token from the request's `_meta`.
    pub progress_token: ProgressToken,
    /// Progress so far; increases with every notification.
    pub progress: f64,
    /// Total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<f64>,
    /// Human-readable progress message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}
