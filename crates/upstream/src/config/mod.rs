//! `[[upstream]]` tables: what one server behind the gateway is, how to reach it, which of its
//! tools are exposed and how they may run; `${VAR}` expansion; validation.
//!
//! Invariant: a validated [`UpstreamConfig`] has a valid unique name, the keys its transport
//! needs and no others, and expanded `env`/`headers` values; those values are secrets (they
//! carry tokens) and are never printed: `Debug` shows their keys only, and every error names
//! the upstream and the key, never a value.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::UpstreamError;
use crate::glob::Glob;

mod oauth;
mod overrides;
mod pin;
mod token_exchange;
mod validate;

pub use oauth::{OAuthConfig, UpstreamAuth};
pub(crate) use overrides::is_valid_tool_name;
pub use overrides::{AnnotationOverride, ToolOverride};
pub use pin::PinMode;
pub use token_exchange::TokenExchangeConfig;
pub use validate::{is_valid_name, validate_all, validate_renames};

/// Every key of an `[[upstream]]` table with its help text (for `--help` and
/// docs/configuration.md; a test checks that the doc lists each, and nothing else).
pub const KEYS: &[(&str, &str)] = &[
    ("name", "[a-z0-9-]{1,32}, unique; the prefix of everything it exposes (required)"),
    ("transport", "stdio | http (Streamable HTTP, either era) | sse (2024-11-05 HTTP+SSE) [stdio]"),
    ("url", "Endpoint URL (http, sse)"),
    ("command", "Program to run (stdio), exec'd directly, never through a shell"),
    ("args", "Its arguments [none]"),
    ("env", "The child's whole environment besides PATH and HOME; values expand ${VAR} [none]"),
    ("cwd", "The child's working directory [the gateway's]"),
    ("headers", "HTTP request headers (http, sse), e.g. credentials; values expand ${VAR} [none]"),
    ("era", "auto | 2026-07-28 | 2025-11-25 | 2025-06-18 | 2025-03-26 [auto: server/discover, else initialize]"),
    ("timeout_secs", "One call, end to end, waiting for a free slot included [120]"),
    (
        "connect_timeout_secs",
        "Connecting, or starting the process (npx may download it first), with the handshake [30]",
    ),
    ("max_concurrency", "Requests in flight to it, per replica [64]"),
    ("max_message_bytes", "Largest message accepted from it [16777216]"),
    (
        "event_timeout_secs",
        "How long an event stream no call bounds (a session's GET stream, a 2024-11-05 session) may leave an event \
         unfinished before it is dropped and opened again [60]",
    ),
    ("tools", "{ include = [globs], exclude = [globs] } over its own tool names [all]"),
    ("task", "never | auto | optional | always: how its tools may become gateway tasks [auto]"),
    ("tool_task", "{ <tool> = never | auto | optional | always }: per-tool task policy [none]"),
    ("task_after_ms", "auto: a call still running after this becomes a task [1000]"),
    ("idempotent", "Its tools safe to run again after a replica died mid-call (besides idempotentHint) [none]"),
    (
        "background",
        "Globs over its own tool names: background tools, answered at once with a task id for clients that take no \
         tasks (followed with task_status / task_result / task_cancel) [none]",
    ),
    ("breaker_failures", "Consecutive failures that open its circuit breaker [5]"),
    ("breaker_cooldown_secs", "How long an open breaker fails calls before one probe goes through [10]"),
    (
        "limits",
        "Rate limits per caller on its tools, across all replicas: calls_per_minute, calls_burst, tasks_per_minute, tasks_burst (unset: the gateway's limits.upstream_* settings; 0 = no limit) [unset]",
    ),
    (
        "token_exchange",
        "http only: each caller's bearer token is exchanged (OAuth 2.0 Token Exchange, RFC 8693) for a token of this \
         upstream's, sent as its Authorization, cached until it expires: token_url, client_id, client_secret (${VAR} \
         expands), audience and/or resource, scope, subject_token_type, requested_token_type, cache_max_entries \
         [10000], timeout_secs [10, or timeout_secs if shorter] [unset: no per-user token]",
    ),
    (
        "auth",
        "headers | oauth: oauth (http only) = each caller connects their own account at the upstream's \
         authorization server, found from its 401 challenge; tokens kept sealed in the store; needs auth.mode = \
         \"jwt\" and server.public_url [headers: what headers and token_exchange say]",
    ),
    (
        "oauth",
        "With auth = \"oauth\": client_id and client_secret registered beforehand (${VAR} expands; unset: a \
         Client ID Metadata Document or Dynamic Client Registration), issuer of the authorization server they were \
         registered at (required with client_secret; https, http only on loopback; set: discovery uses only it and \
         refuses an upstream naming another), scopes [unset: the challenge's, else the \
         metadata's scopes_supported], timeout_secs of each request to the authorization server [10]",
    ),
    (
        "overrides",
        "{ <its own tool name> = { rename, title, description, annotations, hidden, defaults } }: what every \
         caller sees of that tool and what each call sends: rename (the exposed name as written, no prefix), \
         annotations merged over the upstream's, hidden arguments (removed from the schema, fixed values sent on \
         every call; a caller sending one is refused), defaults (filled in when the caller leaves them out) [none]",
    ),
    (
        "pin",
        "false | true | \"first-seen\": pin its tool definitions; a tool whose definition changes (or a new one) is \
         withheld on every replica until `mcpgate admin tools approve`; true: nothing is approved until an operator \
         approves; first-seen: the first definitions seen are approved; not with auth = \"oauth\" [false]",
    ),
];

/// The token type URI of an OAuth access token (RFC 8693 §3), the default subject and
/// requested token type.
pub const ACCESS_TOKEN_TYPE: &str = "urn:ietf:params:oauth:token-type:access_token";

/// How the gateway talks to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TransportKind {
    /// A child process per replica, JSON-RPC lines on stdin/stdout.
    #[default]
    Stdio,
    /// Streamable HTTP (either era).
    Http,
    /// The 2024-11-05 HTTP+SSE transport.
    Sse,
}

/// Which protocol era to speak to an upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum EraChoice {
    /// Try `server/discover` (2026-07-28); on any error answer, `initialize`.
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Stateless 2026-07-28.
    #[serde(rename = "2026-07-28")]
    V2026_07_28,
    /// Sessions, 2025-11-25.
    #[serde(rename = "2025-11-25")]
    V2025_11_25,
    /// Sessions, 2025-06-18.
    #[serde(rename = "2025-06-18")]
    V2025_06_18,
    /// Sessions, 2025-03-26.
    #[serde(rename = "2025-03-26")]
    V2025_03_26,
}

impl EraChoice {
    /// The legacy version to ask for in `initialize` (auto and modern fall back to the newest).
    pub fn legacy_version(self) -> &'static str {
        match self {
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_03_26 => "2025-03-26",
            Self::Auto | Self::V2026_07_28 | Self::V2025_11_25 => "2025-11-25",
        }
    }
}

/// Whether an upstream tool may, must or must not become a gateway task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskMode {
    /// Always synchronous.
    Never,
    /// Synchronous; a legacy client asking for a task gets one (`params.task`).
    #[default]
    Auto,
    /// Every client that can take a task gets one at once.
    Optional,
    /// Only as a task (advertised as task-required).
    Always,
}

/// `tools = { include = [...], exclude = [...] }`: globs over the upstream's own tool names.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolFilter {
    /// Only these (empty = all).
    pub include: Vec<String>,
    /// Never these (wins over include).
    pub exclude: Vec<String>,
}

/// One `[[upstream]]` table.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamConfig {
    /// `[a-z0-9-]{1,32}`, unique: the prefix of everything it exposes.
    pub name: String,
    /// How to reach it.
    #[serde(default)]
    pub transport: TransportKind,
    /// Endpoint URL (http, sse).
    #[serde(default)]
    pub url: Option<String>,
    /// Program to run (stdio), exec'd directly, never through a shell.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The child's whole environment besides `PATH` and `HOME` (values expand `${VAR}`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The child's working directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// Extra HTTP request headers (values expand `${VAR}`).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Protocol era.
    #[serde(default)]
    pub era: EraChoice,
    /// One call, end to end.
    #[serde(default = "default_timeout_secs")]
    pub timeout_secs: u64,
    /// Connecting (or starting the process and its handshake).
    #[serde(default = "default_connect_timeout_secs")]
    pub connect_timeout_secs: u64,
    /// Requests in flight to it, per replica.
    #[serde(default = "default_max_concurrency")]
    pub max_concurrency: u32,
    /// Largest message accepted from it.
    #[serde(default = "default_max_message_bytes")]
    pub max_message_bytes: u64,
    /// How long an event stream that no call bounds may leave an event unfinished.
    #[serde(default = "default_event_timeout_secs")]
    pub event_timeout_secs: u64,
    /// Which tools are exposed.
    #[serde(default)]
    pub tools: ToolFilter,
    /// Task policy of its tools.
    #[serde(default)]
    pub task: TaskMode,
    /// Task policy of single tools (by the upstream's tool name), overriding `task`.
    #[serde(default)]
    pub tool_task: BTreeMap<String, TaskMode>,
    /// `auto`: a call still running after this becomes a task (clients that can take one).
    #[serde(default = "default_task_after_ms")]
    pub task_after_ms: u64,
    /// Tools safe to run again after a replica died mid-call (besides `idempotentHint`).
    #[serde(default)]
    pub idempotent: Vec<String>,
    /// Globs over its tool names: tools that run in the background for clients that take no
    /// tasks (see the gateway's companion tools).
    #[serde(default)]
    pub background: Vec<String>,
    /// Consecutive failures that open the circuit breaker.
    #[serde(default = "default_breaker_failures")]
    pub breaker_failures: u32,
    /// How long an open breaker waits before letting one probe call through.
    #[serde(default = "default_breaker_cooldown_secs")]
    pub breaker_cooldown_secs: u64,
    /// Rate limits per principal on its tools, enforced by the gateway (`[upstream.limits]`).
    #[serde(default)]
    pub limits: UpstreamLimits,
    /// Per-user upstream tokens by OAuth 2.0 Token Exchange (`[upstream.token_exchange]`).
    #[serde(default)]
    pub token_exchange: Option<TokenExchangeConfig>,
    /// How requests are authorized: `headers` or each caller's own `oauth` connection.
    #[serde(default)]
    pub auth: UpstreamAuth,
    /// `[upstream.oauth]`, with `auth = "oauth"`.
    #[serde(default)]
    pub oauth: Option<OAuthConfig>,
    /// `[upstream.overrides.<tool>]`, by the upstream's own tool name: what callers see of that
    /// tool and what its calls send (every other per-tool key keeps the upstream's own name).
    #[serde(default)]
    pub overrides: BTreeMap<String, ToolOverride>,
    /// Whether its tool definitions are pinned (`false | true | "first-seen"`).
    #[serde(default)]
    pub pin: PinMode,
}

/// `[upstream.limits]`: how often one principal may call this upstream's tools, across every
/// replica; each unset value falls back to the gateway's `limits.upstream_*` setting, and 0
/// means no limit. A burst of 0 (or unset) is ten seconds' worth of the rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamLimits {
    /// Calls a minute per principal.
    pub calls_per_minute: Option<u64>,
    /// Calls admitted at once.
    pub calls_burst: Option<u64>,
    /// Task creations a minute per principal.
    pub tasks_per_minute: Option<u64>,
    /// Task creations admitted at once.
    pub tasks_burst: Option<u64>,
}

fn default_timeout_secs() -> u64 {
    120
}
fn default_connect_timeout_secs() -> u64 {
    // `npx -y` / `uvx` may download the server on first start.
    30
}
fn default_max_concurrency() -> u32 {
    64
}
fn default_max_message_bytes() -> u64 {
    16 * 1024 * 1024
}
fn default_event_timeout_secs() -> u64 {
    60
}
fn default_task_after_ms() -> u64 {
    1000
}
fn default_breaker_failures() -> u32 {
    5
}
fn default_breaker_cooldown_secs() -> u64 {
    10
}

impl fmt::Debug for UpstreamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // env and headers values are credentials: keys only.
        f.debug_struct("UpstreamConfig")
            .field("name", &self.name)
            .field("transport", &self.transport)
            .field("url", &self.url.as_deref().map(redact_url))
            .field("command", &self.command)
            .field("args", &self.args.len())
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("era", &self.era)
            .field("task", &self.task)
            .field("token_exchange", &self.token_exchange)
            .field("auth", &self.auth)
            .field("oauth", &self.oauth)
            .field("overrides", &self.overrides.keys().collect::<Vec<_>>())
            .field("pin", &self.pin)
            .finish_non_exhaustive()
    }
}

/// A URL without its userinfo and query (either may carry a credential).
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let rest = rest.split_once('@').map_or(rest, |(_, host)| host);
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    format!("{scheme}://{rest}")
}

impl UpstreamConfig {
    /// A stdio upstream (tests, imports); other keys take their defaults.
    pub fn stdio(name: &str, command: &str, args: &[&str]) -> Self {
        Self {
            command: Some(command.to_owned()),
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            ..Self::named(name)
        }
    }

    /// A Streamable HTTP upstream; other keys take their defaults.
    pub fn http(name: &str, url: &str) -> Self {
        Self { transport: TransportKind::Http, url: Some(url.to_owned()), ..Self::named(name) }
    }

    fn named(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            transport: TransportKind::Stdio,
            url: None,
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            headers: BTreeMap::new(),
            era: EraChoice::Auto,
            timeout_secs: default_timeout_secs(),
            connect_timeout_secs: default_connect_timeout_secs(),
            max_concurrency: default_max_concurrency(),
            max_message_bytes: default_max_message_bytes(),
            event_timeout_secs: default_event_timeout_secs(),
            tools: ToolFilter::default(),
            task: TaskMode::Auto,
            tool_task: BTreeMap::new(),
            task_after_ms: default_task_after_ms(),
            idempotent: Vec::new(),
            background: Vec::new(),
            breaker_failures: default_breaker_failures(),
            breaker_cooldown_secs: default_breaker_cooldown_secs(),
            limits: UpstreamLimits::default(),
            token_exchange: None,
            auth: UpstreamAuth::Headers,
            oauth: None,
            overrides: BTreeMap::new(),
            pin: PinMode::Off,
        }
    }

    /// Deserializes one table (TOML, JSON or any serde format); the error names the key.
    pub fn deserialize_from<'de, D: serde::Deserializer<'de>>(table: D) -> Result<Self, String> {
        // Text: serde's message is the whole problem (it names the key), and the caller's
        // format is generic here, so its error type cannot be named (the gateway's loader
        // deserializes `[[upstream]]` tables itself and keeps that error as the cause).
        Self::deserialize(table).map_err(|e| e.to_string())
    }

    /// The call timeout.
    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.timeout_secs)
    }

    /// How long an event stream that no call bounds may leave an event unfinished.
    pub fn event_timeout(&self) -> Duration {
        Duration::from_secs(self.event_timeout_secs)
    }

    /// The connect (start-up and handshake) timeout.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    /// The task policy of one of its tools.
    pub fn task_mode(&self, tool: &str) -> TaskMode {
        self.tool_task.get(tool).copied().unwrap_or(self.task)
    }

    /// Whether one of its tools is a background tool (`background` globs).
    pub fn is_background(&self, tool: &str) -> bool {
        self.background.iter().any(|p| Glob::new(p).matches(tool))
    }

    /// Whether each caller connects their own account (`auth = "oauth"`).
    pub fn is_oauth(&self) -> bool {
        self.auth == UpstreamAuth::Oauth
    }

    /// Its `[upstream.oauth]` table (the defaults when it has none).
    pub fn oauth(&self) -> OAuthConfig {
        self.oauth.clone().unwrap_or_default()
    }

    /// Whether one of its tools is exposed (include / exclude globs).
    pub fn exposes(&self, tool: &str) -> bool {
        let matches = |patterns: &[String]| patterns.iter().any(|p| Glob::new(p).matches(tool));
        (self.tools.include.is_empty() || matches(&self.tools.include)) && !matches(&self.tools.exclude)
    }

    /// Replaces `${VAR}` in `env` and `headers` values and in the token exchange's client id
    /// and secret from `lookup` (`$$` is a literal `$`).
    pub fn expand(&mut self, lookup: &dyn Fn(&str) -> Option<String>) -> Result<(), UpstreamError> {
        let name = &self.name;
        let failed =
            |key: String| move |problem| UpstreamError::Config { upstream: name.clone(), key, problem, source: None };
        for (section, map) in [("env", &mut self.env), ("headers", &mut self.headers)] {
            for (key, value) in map.iter_mut() {
                *value = crate::expand::expand(value, lookup).map_err(failed(format!("{section}.{key}")))?;
            }
        }
        if let Some(exchange) = &mut self.token_exchange {
            for (key, value) in [("client_id", &mut exchange.client_id), ("client_secret", &mut exchange.client_secret)]
            {
                *value = crate::expand::expand(value, lookup).map_err(failed(format!("token_exchange.{key}")))?;
            }
        }
        if let Some(oauth) = &mut self.oauth {
            for (key, value) in [("client_id", &mut oauth.client_id), ("client_secret", &mut oauth.client_secret)] {
                if let Some(value) = value {
                    *value = crate::expand::expand(value, lookup).map_err(failed(format!("oauth.{key}")))?;
                }
            }
        }
        Ok(())
    }

    /// The exposed name of its tool `tool`: the override's `rename` as written, else
    /// `<upstream><separator><tool>`.
    pub fn exposed_name(&self, tool: &str, separator: &str) -> String {
        match self.overrides.get(tool).and_then(|o| o.rename.as_deref()) {
            Some(rename) => rename.to_owned(),
            None => format!("{}{separator}{tool}", self.name),
        }
    }
}

#[cfg(test)]
mod tests;
