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

pub use oauth::{OAuthConfig, UpstreamAuth};
pub(crate) use overrides::is_valid_tool_name;
pub use overrides::{AnnotationOverride, ToolOverride};
pub use pin::PinMode;
pub use token_exchange::TokenExchangeConfig;

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
        let failed = |key: String| move |problem| UpstreamError::Config { upstream: name.clone(), key, problem };
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

    /// Checks what the types alone cannot.
    pub fn validate(&self) -> Result<(), UpstreamError> {
        let bad = |key: &str, problem: String| UpstreamError::Config {
            upstream: self.name.clone(),
            key: key.to_owned(),
            problem,
        };
        if !is_valid_name(&self.name) {
            return Err(bad("name", "must be 1 to 32 characters of a-z, 0-9 and -".to_owned()));
        }
        match self.transport {
            TransportKind::Stdio => {
                if self.command.as_deref().is_none_or(str::is_empty) {
                    return Err(bad("command", "required for transport = \"stdio\"".to_owned()));
                }
                if self.url.is_some() {
                    return Err(bad(
                        "url",
                        "not used by transport = \"stdio\" (did you mean transport = \"http\"?)".to_owned(),
                    ));
                }
                if !self.headers.is_empty() {
                    return Err(bad("headers", "not used by transport = \"stdio\" (use env)".to_owned()));
                }
            }
            TransportKind::Http | TransportKind::Sse => {
                let Some(url) = &self.url else {
                    return Err(bad("url", "required for transport = \"http\" and \"sse\"".to_owned()));
                };
                if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() < 10 {
                    return Err(bad("url", format!("must be an absolute http(s) URL (got {})", redact_url(url))));
                }
                if self.command.is_some() || !self.args.is_empty() || !self.env.is_empty() || self.cwd.is_some() {
                    return Err(bad(
                        "command",
                        "command, args, env and cwd are only for transport = \"stdio\"".to_owned(),
                    ));
                }
                for name in self.headers.keys() {
                    if name.is_empty() || !name.bytes().all(is_token_byte) {
                        return Err(bad(&format!("headers.{name}"), "not a valid HTTP header name".to_owned()));
                    }
                    let lower = name.to_ascii_lowercase();
                    if lower.starts_with("mcp-") || lower == "content-type" || lower == "accept" || lower == "host" {
                        return Err(bad(&format!("headers.{name}"), "set by mcpgate itself".to_owned()));
                    }
                }
                for (name, value) in &self.headers {
                    if value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
                        return Err(bad(&format!("headers.{name}"), "the value has control characters".to_owned()));
                    }
                }
            }
        }
        if let Some(exchange) = &self.token_exchange {
            if self.transport != TransportKind::Http {
                return Err(bad(
                    "token_exchange",
                    "only for transport = \"http\": a stdio process (or a 2024-11-05 event stream) serves every \
                     caller alike, with no per-request credentials"
                        .to_owned(),
                ));
            }
            if self.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
                return Err(bad(
                    "headers.Authorization",
                    "not with token_exchange, which sets each request's Authorization to the caller's exchanged \
                     token"
                        .to_owned(),
                ));
            }
            exchange.validate().map_err(|(key, problem)| bad(&format!("token_exchange.{key}"), problem))?;
        }
        match (self.auth, &self.oauth) {
            (UpstreamAuth::Oauth, oauth) => {
                if self.transport != TransportKind::Http {
                    return Err(bad(
                        "auth",
                        "oauth is only for transport = \"http\": each caller's requests carry their own token"
                            .to_owned(),
                    ));
                }
                if self.token_exchange.is_some() {
                    return Err(bad("token_exchange", "not with auth = \"oauth\": choose one".to_owned()));
                }
                if self.headers.keys().any(|h| h.eq_ignore_ascii_case("authorization")) {
                    return Err(bad(
                        "headers.Authorization",
                        "not with auth = \"oauth\", which sets each request's Authorization to the caller's own \
                         token"
                            .to_owned(),
                    ));
                }
                if self.pin.is_pinned() {
                    // Each caller's tools come from their own connection and are never in the
                    // shared lists the pins are checked against.
                    return Err(bad(
                        "pin",
                        "not with auth = \"oauth\": each caller's own tools cannot be pinned; pin a shared upstream"
                            .to_owned(),
                    ));
                }
                if let Some(oauth) = oauth {
                    oauth.validate().map_err(|(key, problem)| bad(&format!("oauth.{key}"), problem))?;
                }
            }
            (UpstreamAuth::Headers, Some(_)) => {
                return Err(bad("oauth", "only with auth = \"oauth\"".to_owned()));
            }
            (UpstreamAuth::Headers, None) => {}
        }
        if self.transport == TransportKind::Sse && self.era != EraChoice::Auto {
            return Err(bad("era", "transport = \"sse\" always speaks 2024-11-05; leave era unset".to_owned()));
        }
        for (key, value, min, max) in [
            ("timeout_secs", self.timeout_secs, 1, 86_400),
            ("connect_timeout_secs", self.connect_timeout_secs, 1, 600),
            ("max_concurrency", u64::from(self.max_concurrency), 1, 100_000),
            ("max_message_bytes", self.max_message_bytes, 1024, 1 << 30),
            ("event_timeout_secs", self.event_timeout_secs, 1, 3600),
            ("task_after_ms", self.task_after_ms, 10, 3_600_000),
            ("breaker_failures", u64::from(self.breaker_failures), 1, 1000),
            ("breaker_cooldown_secs", self.breaker_cooldown_secs, 1, 3600),
            ("limits.calls_per_minute", self.limits.calls_per_minute.unwrap_or(0), 0, 60_000_000),
            ("limits.calls_burst", self.limits.calls_burst.unwrap_or(0), 0, 1_000_000),
            ("limits.tasks_per_minute", self.limits.tasks_per_minute.unwrap_or(0), 0, 60_000_000),
            ("limits.tasks_burst", self.limits.tasks_burst.unwrap_or(0), 0, 1_000_000),
        ] {
            if !(min..=max).contains(&value) {
                return Err(bad(key, format!("must be between {min} and {max}")));
            }
        }
        for (key, patterns) in [
            ("tools.include", &self.tools.include),
            ("tools.exclude", &self.tools.exclude),
            ("background", &self.background),
        ] {
            if let Some(p) = patterns.iter().find(|p| p.is_empty()) {
                return Err(bad(key, format!("empty pattern {p:?}")));
            }
        }
        for (key, value) in &self.env {
            if key.is_empty() || key.contains(['=', '\0']) || value.contains('\0') {
                return Err(bad(&format!("env.{key}"), "not a valid environment variable".to_owned()));
            }
        }
        self.validate_overrides()
    }

    /// Each override valid, and no two of its overrides renaming to one name.
    fn validate_overrides(&self) -> Result<(), UpstreamError> {
        let mut renames = BTreeMap::new();
        for (tool, o) in &self.overrides {
            let key = |sub: &str| format!("overrides.{tool}.{sub}");
            let bad =
                |key: String, problem: String| UpstreamError::Config { upstream: self.name.clone(), key, problem };
            if tool.is_empty() {
                return Err(bad("overrides".to_owned(), "an empty tool name".to_owned()));
            }
            o.validate().map_err(|(sub, problem)| bad(key(&sub), problem))?;
            if let Some(rename) = &o.rename
                && let Some(other) = renames.insert(rename.as_str(), tool.as_str())
            {
                return Err(bad(key("rename"), format!("{other:?} is renamed to {rename:?} too")));
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

/// Whether `name` is a valid upstream name.
pub fn is_valid_name(name: &str) -> bool {
    (1..=32).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Validates a whole list: each entry, names unique, and no two upstreams' overrides renaming
/// to one name.
pub fn validate_all(upstreams: &[UpstreamConfig]) -> Result<(), UpstreamError> {
    let mut seen = std::collections::HashSet::new();
    let mut renames: BTreeMap<&str, &str> = BTreeMap::new();
    for u in upstreams {
        u.validate()?;
        if !seen.insert(u.name.as_str()) {
            return Err(UpstreamError::Config {
                upstream: u.name.clone(),
                key: "name".to_owned(),
                problem: "two upstreams have this name".to_owned(),
            });
        }
        for (tool, rename) in u.overrides.iter().filter_map(|(t, o)| Some((t, o.rename.as_deref()?))) {
            if let Some(other) = renames.insert(rename, &u.name) {
                return Err(UpstreamError::Config {
                    upstream: u.name.clone(),
                    key: format!("overrides.{tool}.rename"),
                    problem: format!("upstream {other} renames a tool to {rename:?} too"),
                });
            }
        }
    }
    Ok(())
}

/// Refuses a `rename` inside another upstream's namespace (`<name><separator>…`): which of the
/// two tools would get the name would depend on the order the upstreams list their tools.
pub fn validate_renames(upstreams: &[UpstreamConfig], separator: &str) -> Result<(), UpstreamError> {
    for u in upstreams {
        for (tool, rename) in u.overrides.iter().filter_map(|(t, o)| Some((t, o.rename.as_deref()?))) {
            if let Some(owner) = upstreams.iter().find(|o| {
                rename.strip_prefix(o.name.as_str()).is_some_and(|rest| rest.starts_with(separator))
                    && !(o.name == u.name && rename == format!("{}{separator}{tool}", u.name))
            }) {
                return Err(UpstreamError::Config {
                    upstream: u.name.clone(),
                    key: format!("overrides.{tool}.rename"),
                    problem: format!(
                        "{rename:?} is in upstream {}'s names ({}{separator}…): choose a name outside every \
                         upstream's prefix",
                        owner.name, owner.name
                    ),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
