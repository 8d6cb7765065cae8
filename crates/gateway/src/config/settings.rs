//! The registry of every setting: its TOML key, its `MCPGATE_*` environment twin (derived
//! from the key), its value kind, and its help text; and the default each shows.
//!
//! Invariants: a setting exists in the config file, the environment, `--help` and the
//! settings table of docs/configuration.md only through an entry here; a test checks that
//! every `Config` field has one. A default is written once, in the `Default` impls of
//! `Config`: what `--help` and the docs show is read from `Config::default()`, never written
//! here. Configuration errors name a setting through here too (key and variable).

use crate::error::StartupError;

/// The kind of value a setting holds, which decides how an environment string is parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A string.
    Str,
    /// A non-negative integer.
    Int,
    /// `true` or `false`.
    Bool,
    /// A list of strings (comma-separated in the environment).
    List,
}

/// One setting.
#[derive(Debug, Clone, Copy)]
pub struct Setting {
    /// Dotted TOML key, e.g. `auth.jwt.issuer`.
    pub key: &'static str,
    /// Value kind.
    pub kind: Kind,
    /// Whether the value is secret (never echoed in errors or logs).
    pub secret: bool,
    /// One-line description, without the default (see [`Setting::default_text`]).
    pub help: &'static str,
}

impl Setting {
    /// The environment variable: `MCPGATE_` + key with dots as underscores, upper-cased.
    pub fn env_name(&self) -> String {
        let mut name = String::with_capacity(8 + self.key.len());
        name.push_str("MCPGATE_");
        name.extend(self.key.chars().map(|c| if c == '.' { '_' } else { c.to_ascii_uppercase() }));
        name
    }

    /// The default as `--help` and docs/configuration.md show it (in brackets after the
    /// help), read from `defaults` ([`defaults`]): lists comma-separated as in the
    /// environment, an empty list as `empty`. None for a secret, and for a setting that is
    /// absent unless set.
    pub fn default_text(&self, defaults: &toml::Table) -> Option<String> {
        if self.secret {
            return None;
        }
        let mut parts = self.key.split('.');
        let first = defaults.get(parts.next()?)?;
        let value = parts.try_fold(first, |value, part| value.get(part))?;
        Some(match value {
            toml::Value::String(text) => text.clone(),
            toml::Value::Array(items) if items.is_empty() => "empty".to_owned(),
            toml::Value::Array(items) => items
                .iter()
                .map(|item| item.as_str().map_or_else(|| item.to_string(), str::to_owned))
                .collect::<Vec<_>>()
                .join(","),
            other => other.to_string(),
        })
    }
}

/// `Config::default()` as a TOML table: the one source of the defaults `--help` and the
/// docs show.
pub fn defaults() -> toml::Table {
    // A default config always serializes: every field is a plain value, list or table.
    toml::Table::try_from(super::Config::default()).unwrap_or_default()
}

const fn s(key: &'static str, kind: Kind, help: &'static str) -> Setting {
    Setting { key, kind, secret: false, help }
}

const fn secret(key: &'static str, kind: Kind, help: &'static str) -> Setting {
    Setting { key, kind, secret: true, help }
}

/// Every setting, in the order `--help` and docs/configuration.md list them.
pub const SETTINGS: &[Setting] = &[
    s("listen", Kind::Str, "Address to listen on; port 0 picks a free port and prints it"),
    s(
        "redis_url",
        Kind::Str,
        "Redis URL (redis:// or rediss://); absent = embedded single-replica mode; set = multi-replica mode, which requires seal.keys",
    ),
    s(
        "toolset",
        Kind::List,
        "Built-in toolsets to serve: demo, conformance; none when upstreams are configured and this is not set",
    ),
    s("server.instructions", Kind::Str, "Instructions for the model, returned by server/discover and initialize"),
    s("server.list_ttl_ms", Kind::Int, "ttlMs on tools/prompts/resources lists"),
    s("server.discover_ttl_ms", Kind::Int, "ttlMs on server/discover"),
    s("server.tool_timeout_secs", Kind::Int, "Longest a synchronous tools/call, prompts/get or resources/read may run"),
    s(
        "server.public_url",
        Kind::Str,
        "Where users' browsers reach the gateway (https, or http on a loopback host; no query or fragment): connect links and OAuth callbacks live under <public_url>/oauth/; required with an auth = \"oauth\" upstream",
    ),
    s(
        "server.client_metadata_url",
        Kind::Str,
        "The gateway's client id at authorization servers that accept Client ID Metadata Documents: that document's https URL (unset: <public_url>/oauth/client-metadata.json, served by the gateway, offered only when public_url is https); set it to host the document elsewhere, listing <public_url>/oauth/callback/<upstream> for each oauth upstream without a client_id of its own as its redirect URIs (the document is used only with servers that send RFC 9207 iss)",
    ),
    s("http.body_limit_bytes", Kind::Int, "Largest request body accepted; larger bodies get 413"),
    s(
        "http.allowed_origins",
        Kind::List,
        "Origins allowed in the Origin header (scheme://host[:port], or *); when empty and listening on loopback, loopback origins are allowed",
    ),
    s(
        "http.allowed_hosts",
        Kind::List,
        "Host header names accepted (DNS-rebinding protection); empty = loopback names when listening on loopback, any otherwise",
    ),
    s("http.body_timeout_secs", Kind::Int, "Longest a client may take to send a request body; slower ones get 408"),
    s(
        "http.max_buffered_body_bytes",
        Kind::Int,
        "Request-body bytes buffered at once across all requests; beyond it requests get 503",
    ),
    s("http.max_concurrent_requests", Kind::Int, "Requests processed at once per replica; beyond it requests get 503"),
    s(
        "http.shed_at_requests",
        Kind::Int,
        "Load shedding: with this many requests in flight on a replica (counting the call), a synchronous 2026-07-28 tool call that checkpoints is answered with its sealed checkpoint and no input requests, so the client's retry continues on another replica; 0 = never",
    ),
    s("http.sse_keepalive_secs", Kind::Int, "Interval of keep-alive comments on SSE responses"),
    s(
        "http.max_listeners",
        Kind::Int,
        "subscriptions/listen streams (and legacy GET streams) open at once per replica; beyond it 503",
    ),
    s(
        "http.max_listeners_per_principal",
        Kind::Int,
        "Listen streams one authenticated principal may hold open on one replica; beyond it 429",
    ),
    s("auth.mode", Kind::Str, "none (one anonymous principal; loopback only unless allowed) or jwt"),
    s("auth.allow_anonymous_non_loopback", Kind::Bool, "Allow auth.mode = none on a non-loopback listen address"),
    s(
        "auth.resource",
        Kind::Str,
        "Canonical URI of this MCP endpoint (e.g. https://mcp.example.com/mcp): the default JWT audience and the protected resource metadata `resource`",
    ),
    s(
        "auth.authorization_servers",
        Kind::List,
        "Authorization server issuer URLs listed in the protected resource metadata (jwt mode: at least one)",
    ),
    s("auth.scopes_supported", Kind::List, "Scopes listed in the protected resource metadata"),
    s(
        "auth.required_scopes",
        Kind::List,
        "Scopes every token must carry (space-separated `scope` claim); missing ones get 403 insufficient_scope",
    ),
    s("auth.jwt.issuer", Kind::Str, "Required `iss` of accepted tokens (jwt mode)"),
    s("auth.jwt.audience", Kind::Str, "Required `aud` of accepted tokens; auth.resource when not set"),
    s("auth.jwt.algorithms", Kind::List, "Accepted signature algorithms"),
    secret("auth.jwt.hs256_secrets", Kind::List, "Shared secrets for HS256 tokens, at least 32 bytes each"),
    s(
        "auth.jwt.public_key_files",
        Kind::List,
        "PEM public key files (RSA, EC P-256/P-384 or Ed25519), each `path` or `kid=path`",
    ),
    s(
        "auth.jwt.jwks_file",
        Kind::Str,
        "JWKS document on disk; re-read (rate-limited) when a token names an unknown kid",
    ),
    s("auth.jwt.jwks_url", Kind::Str, "JWKS URL (https, or http on loopback); cached and refreshed on an unknown kid"),
    s("auth.jwt.leeway_secs", Kind::Int, "Clock skew allowed on exp and nbf"),
    s("auth.jwt.jwks_refresh_min_secs", Kind::Int, "Least time between two JWKS refreshes"),
    s("auth.jwt.jwks_cache_secs", Kind::Int, "How long a fetched JWKS is used before it is fetched again"),
    s(
        "auth.browser_login.client_id",
        Kind::Str,
        "The gateway's OpenID Connect client id at auth.jwt.issuer, where a user opening a connect link signs in (redirect URI <public_url>/oauth/login/callback); required with an oauth upstream unless verify_user = false",
    ),
    secret("auth.browser_login.client_secret", Kind::Str, "Its client secret; absent = a public client"),
    s("auth.browser_login.scopes", Kind::List, "Scopes asked for at that sign-in"),
    s(
        "auth.browser_login.verify_user",
        Kind::Bool,
        "Refuse a connect link unless the user signing in at auth.jwt.issuer is the principal it was made for (same iss and sub); false = the link alone suffices, and whoever opens it connects their own account to that principal (see docs/security.md)",
    ),
    secret(
        "seal.keys",
        Kind::List,
        "Sealing keys `kid:base64(32 bytes)`; the first seals, all open; absent = one random key (single replica only)",
    ),
    s("seal.session_ttl_secs", Kind::Int, "Lifetime of a legacy sealed session id"),
    s("seal.request_state_ttl_secs", Kind::Int, "Lifetime of a sealed MRTR requestState"),
    s(
        "seal.request_state_single_use",
        Kind::Bool,
        "Refuse a requestState presented twice (each use is recorded in the store until it expires; a client \
         retrying a lost reply must then start the call over)",
    ),
    s("seal.max_bytes", Kind::Int, "Longest sealed value minted or accepted"),
    s("tasks.default_ttl_ms", Kind::Int, "Lifetime of a task when the client asks for none"),
    s("tasks.max_ttl_ms", Kind::Int, "Longest task lifetime granted; longer requests are clamped to it"),
    s(
        "tasks.allow_unlimited_ttl",
        Kind::Bool,
        "Whether a legacy client may ask for an unlimited task lifetime (ttl null)",
    ),
    s("tasks.poll_interval_ms", Kind::Int, "Poll interval suggested to clients"),
    s(
        "tasks.answer_within_ms",
        Kind::Int,
        "How long a 2026-07-28 tools/call whose task starts on the replica that created it waits for the run to end: a task that completes within it is answered with its result (its id in _meta io.mcpgate/taskId) instead of CreateTaskResult, and stays readable; at most 250; 0 = always answer with the task",
    ),
    s(
        "tasks.idempotency_window_ms",
        Kind::Int,
        "How long a repeated task call returns the task it created: 2025-11-25, the same session, request id, tool and arguments; 2026-07-28, the same Idempotency-Key",
    ),
    s("tasks.max_answer_bytes", Kind::Int, "Largest answer to one input request of a task"),
    s("tasks.max_task_answer_bytes", Kind::Int, "Most bytes of answers one task may collect over all its input rounds"),
    s(
        "tasks.unknown_tool_grace_secs",
        Kind::Int,
        "How long a task whose tool this replica does not know is left for other replicas (a rolling upgrade) before it fails naming the tool",
    ),
    s(
        "tasks.max_running",
        Kind::Int,
        "Tasks executing at once per replica, including calls that became tasks while they ran (a 2025-11-25 call waiting for input holds one while it waits); 0 = this replica serves tasks but runs none (needs redis_url or store.sentinel)",
    ),
    s(
        "tasks.lease_ms",
        Kind::Int,
        "Lease of a running task; a replica that stops renewing it for this long loses the task to another; at least twice store.command_timeout_ms with Redis",
    ),
    s("tasks.max_attempts", Kind::Int, "Executions started per task before it fails with a clear error"),
    s("tasks.max_result_waiters", Kind::Int, "Legacy tasks/result requests waiting at once per replica; beyond it 503"),
    s(
        "tasks.max_result_waiters_per_principal",
        Kind::Int,
        "Legacy tasks/result requests one authenticated principal may have waiting at once on one replica (a 2025-11-25 call waiting for its client's answers counts too); beyond it 429",
    ),
    s(
        "tasks.anonymous_scope",
        Kind::Str,
        "Under auth.mode = none, whom a task belongs to: session (a 2025-11-25 session's tasks are seen only in that session) or server (every anonymous caller sees every task)",
    ),
    s("background.status_tool", Kind::Str, "Name of the companion tool reporting a background task's status"),
    s("background.result_tool", Kind::Str, "Name of the companion tool returning a background task's result"),
    s("background.cancel_tool", Kind::Str, "Name of the companion tool cancelling a background task"),
    s(
        "background.busy_retry_secs",
        Kind::Int,
        "A background call made while this replica's task workers are all busy is refused, saying to retry after this many seconds",
    ),
    s(
        "limits.calls_per_minute",
        Kind::Int,
        "tools/call requests a minute per principal, across all replicas; beyond it 429 with Retry-After; 0 = no limit",
    ),
    s("limits.calls_burst", Kind::Int, "Calls a principal may make at once; 0 = ten seconds' worth of the rate"),
    s(
        "limits.tasks_per_minute",
        Kind::Int,
        "Task creations a minute per principal, across all replicas; beyond it 429 with Retry-After; 0 = no limit",
    ),
    s("limits.tasks_burst", Kind::Int, "Tasks a principal may create at once; 0 = ten seconds' worth of the rate"),
    s(
        "limits.polls_per_minute",
        Kind::Int,
        "tasks/get polls a minute per principal: past the burst a poll is answered with a longer poll interval (pollIntervalMs; legacy pollInterval) saying when to poll next, and a client polling twice as fast as that gets 429; 0 = no limit",
    ),
    s("limits.polls_burst", Kind::Int, "Polls a principal may make at once; 0 = ten seconds' worth of the rate"),
    s(
        "limits.upstream_calls_per_minute",
        Kind::Int,
        "Requests a minute per principal to one upstream: calls of its tools, prompts/get of its prompts, resources/read of its resources (an upstream's limits.calls_per_minute overrides it); 0 = no limit",
    ),
    s(
        "limits.upstream_tasks_per_minute",
        Kind::Int,
        "Task creations a minute per principal for one upstream's tools (an upstream's limits.tasks_per_minute overrides it); 0 = no limit",
    ),
    s(
        "limits.max_running_tasks",
        Kind::Int,
        "Tasks one principal may have running at once (working or input_required), across all replicas; a creation beyond it gets 429; 0 = no quota",
    ),
    s(
        "limits.max_retained_tasks",
        Kind::Int,
        "Tasks one principal may have stored at once (any status, until they expire), across all replicas; a creation beyond it gets 429; 0 = no quota",
    ),
    s(
        "limits.max_stored_bytes",
        Kind::Int,
        "Bytes one principal's stored tasks may hold (arguments, answers and state given at creation, plus each result once recorded; until they expire), across all replicas; a creation that would go over gets 429 (a result may go over: it is never dropped); 0 = no quota",
    ),
    s("store.prefix", Kind::Str, "Prefix of every Redis key (deployments may share a Redis)"),
    s("store.shards", Kind::Int, "Task shards (job streams), 1 to 256; must be equal on every replica"),
    s("store.pool_size", Kind::Int, "Redis connections per replica, each shared by all concurrent calls (multiplexed)"),
    s("store.command_timeout_ms", Kind::Int, "Bound on every Redis call: connect and response"),
    s(
        "store.cluster",
        Kind::Bool,
        "redis_url is a Redis Cluster: one or more seed node URLs, comma-separated (every key of a task is in one \
         slot)",
    ),
    s(
        "store.encrypt_at_rest",
        Kind::Bool,
        "Seal task arguments, input answers, continuation state and results in Redis with seal.keys (AES-256-GCM \
         bound to the task, the field, and the owner, era and tool); status, owner, tool and timestamps stay \
         readable. Off writes them in plain text but still reads sealed ones",
    ),
    s(
        "store.at_rest_window_secs",
        Kind::Int,
        "With store.encrypt_at_rest: how long after the first replica started with it (a time kept in Redis) \
         tasks may still be created holding plain payloads or payloads sealed by an older release, so a rolling \
         change runs without losing tasks; a task created later whose payload is not sealed in the current format \
         reads as an error",
    ),
    s(
        "store.sentinel.master_name",
        Kind::Str,
        "With [store.sentinel]: the name the sentinels monitor the Redis primary under; replicas find the primary \
         through the sentinels and follow its failovers (instead of redis_url, which must then be absent)",
    ),
    s("store.sentinel.addresses", Kind::List, "The sentinels, host:port each (at least one)"),
    s("store.sentinel.tls", Kind::Bool, "TLS to the sentinels and to the Redis nodes they name"),
    s("store.sentinel.username", Kind::Str, "ACL user on the Redis nodes"),
    secret("store.sentinel.password", Kind::Str, "Password on the Redis nodes"),
    s("store.sentinel.sentinel_username", Kind::Str, "ACL user on the sentinels"),
    secret("store.sentinel.sentinel_password", Kind::Str, "Password on the sentinels"),
    s(
        "store.replicas_ack",
        Kind::Int,
        "Redis replicas that must hold each task write a client or a worker relies on (creation, claim, input \
         request, answer, result, cancel), each vault write and delete (users' connections, client registrations) \
         and each single-use mark (a connect link, an OAuth flow state, a single-use requestState) before it is \
         answered (WAIT after the write, same round trip), 0 to 16; a write not acknowledged in time fails as 'task store unavailable' (a task write is \
         safe to retry; a link whose mark failed so is spent). 0 = answer once the primary has it: a failover may \
         lose it",
    ),
    s(
        "store.replicas_ack_timeout_ms",
        Kind::Int,
        "With store.replicas_ack: how long a write waits for its replicas; below store.command_timeout_ms",
    ),
    s(
        "store.tls_ca_file",
        Kind::Str,
        "PEM file of the CA certificates that TLS connections to Redis (rediss:// in redis_url, cluster seeds, \
         store.sentinel.tls) verify the servers against, instead of the system roots (a private CA); read at start-up; \
         absent = the system roots",
    ),
    s(
        "store.terminal_cache_entries",
        Kind::Int,
        "Finished (completed, failed, cancelled) task records each replica keeps in memory after reading one, so \
         tasks/get of a finished task needs no Redis round trip (a record never changes once finished); dropped at \
         the task's expiry, 60 s after it was kept at the latest, and when it is purged on any replica (within the \
         pub/sub delivery time); 0 = keep none, at most 10000000",
    ),
    s("store.terminal_cache_bytes", Kind::Int, "Bytes the finished task records kept by a replica may take"),
    s(
        "store.terminal_cache_record_bytes",
        Kind::Int,
        "A finished task record larger than this (its result, mostly) is not kept; at most store.terminal_cache_bytes",
    ),
    s("log.format", Kind::Str, "text or json"),
    s("log.level", Kind::Str, "Log filter, e.g. info or mcpgate=debug,info"),
    s(
        "admin.listen",
        Kind::Str,
        "Address of the admin API's own listener (list, inspect, cancel and purge tasks, drain this replica); port 0 picks a free port and prints it; absent = no admin API",
    ),
    secret(
        "admin.token",
        Kind::Str,
        "Bearer token of the admin API, at least 32 characters; required with admin.listen",
    ),
    s(
        "admin.show_payloads",
        Kind::Bool,
        "Whether the admin API's task inspection shows arguments, answers, state and result (decrypted)",
    ),
    s(
        "admin.private_metrics",
        Kind::Bool,
        "Serve /metrics and /upstreams only on the admin listener (without its token), not on the MCP listener; needs admin.listen",
    ),
    s(
        "audit.enabled",
        Kind::Bool,
        "Write the audit trail: one JSON line per tools/call, prompts/get and resources/read and per task transition (see docs/audit.md)",
    ),
    s("audit.sink", Kind::Str, "Where audit lines go: stdout or file (audit.path)"),
    s("audit.path", Kind::Str, "The audit file (appended to) of audit.sink = \"file\""),
    s(
        "audit.include_arguments",
        Kind::Bool,
        "Put call arguments in audit lines (clipped to keep a line bounded); results never are",
    ),
    s(
        "shutdown.drain_secs",
        Kind::Int,
        "On SIGTERM/SIGINT, how long /readyz reports 503 before the listener closes, so load balancers stop routing first",
    ),
    s(
        "shutdown.grace_secs",
        Kind::Int,
        "On SIGTERM/SIGINT, how long in-flight requests and running tasks may finish (tasks still running are then handed to other replicas)",
    ),
    s("federation.separator", Kind::Str, "Between an upstream's name and its tool or prompt names"),
    s("federation.list_refresh_secs", Kind::Int, "Re-read upstream lists this often"),
    s(
        "federation.mcp_servers_file",
        Kind::Str,
        "A Claude-Desktop-style JSON file whose mcpServers become upstreams (also --mcp-servers)",
    ),
    s(
        "federation.import_env",
        Kind::List,
        "Environment variables an imported mcpServers file's ${VAR} may name; any other ${VAR} in it stops start-up (the operator's own [[upstream]] tables expand any)",
    ),
    s("federation.startup_wait_secs", Kind::Int, "How long start-up waits for the upstreams' lists"),
    s(
        "policy_default",
        Kind::Str,
        "What policy decides when no [[policy]] rule holds: allow or deny (rules are [[policy]] tables in the config file; see docs/policy.md)",
    ),
    s(
        "policy_hide_denied",
        Kind::Bool,
        "Answer a use denied by policy as if the tool, prompt or resource did not exist, instead of naming the rule's message",
    ),
    s(
        "root_endpoint",
        Kind::Bool,
        "Serve the whole catalog at /mcp; false: /mcp answers 404 and only the [[server]] virtual servers serve (see docs/servers.md)",
    ),
];

/// Looks a setting up by its TOML key.
pub fn find(key: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.key == key)
}

/// A configuration error naming `setting` by its key and its environment variable.
pub(crate) fn invalid(setting: &Setting, problem: &str) -> StartupError {
    StartupError::config(format!("{} ({})", setting.key, setting.env_name()), problem.to_owned())
}

/// A configuration error naming the setting `key` (by its environment variable too, when it
/// is one of [`SETTINGS`]).
pub(crate) fn invalid_key(key: &str, problem: &str) -> StartupError {
    match find(key) {
        Some(setting) => invalid(setting, problem),
        None => StartupError::config(key.to_owned(), problem.to_owned()),
    }
}
