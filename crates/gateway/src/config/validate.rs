//! Validation: what the types alone cannot check (required combinations, ranges, formats,
//! files that must hold what they claim), for a loaded configuration and for one built in
//! code. Every error names the setting (and its environment twin) and never echoes a secret
//! value.

use std::collections::HashSet;

use super::settings::invalid_key;
use super::{AuthMode, Config};
use crate::error::StartupError;
use mcpgate_runtime::toolsets;

/// What an unusable `seal.keys` is told (the key ring's own error, naming the entry, is the
/// cause).
pub(crate) const SEAL_KEYS_ADVICE: &str =
    "not a usable key ring: each entry is <key id>:<base64 of 32 bytes>; make one with `mcpgate --generate-seal-key`";

/// Highest rate a limit may name: one request a microsecond (the buckets' resolution).
pub(crate) const MAX_PER_MINUTE: u64 = 60_000_000;
/// Largest burst a limit may name.
pub(crate) const MAX_BURST: u64 = 1_000_000;

/// [`invalid_key`] for a value another component refused: `source` says why.
fn invalid_key_caused(key: &str, problem: &str, source: impl Into<crate::error::BoxError>) -> StartupError {
    match invalid_key(key, problem) {
        StartupError::Config { setting, problem, .. } => {
            StartupError::Config { setting, problem, source: Some(source.into()) }
        }
        other => other,
    }
}

/// Checks what the types alone cannot: required combinations, ranges and formats.
/// (Whether there is anything to serve at all is checked when the catalog is built, as a
/// program using the library may bring its own tools.)
pub(super) fn validate(c: &Config) -> Result<(), StartupError> {
    crate::policy::Policy::from_rules(&c.policy, c.policy_default, c.policy_hide_denied)?;
    super::validate_servers(c)?;
    for server in &c.servers {
        crate::policy::Policy::from_rules(&server.policy, server.policy_default, server.policy_hide_denied)
            .map_err(|e| e.within(&server.setting()))?;
    }
    if c.federation.separator.is_empty()
        || !c.federation.separator.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
    {
        return Err(invalid_key("federation.separator", "must be non-empty, of A-Z a-z 0-9 _ - ."));
    }
    let mut seen = HashSet::new();
    for name in &c.toolset {
        if !toolsets::KNOWN.contains(&name.as_str()) {
            return Err(invalid_key(
                "toolset",
                &format!("unknown toolset {name:?}; known: {}", toolsets::KNOWN.join(", ")),
            ));
        }
        if !seen.insert(name) {
            return Err(invalid_key("toolset", &format!("toolset {name:?} is listed twice")));
        }
    }
    for (key, value, min) in [
        ("server.tool_timeout_secs", c.server.tool_timeout_secs, 1),
        ("http.body_limit_bytes", c.http.body_limit_bytes, 1024),
        ("http.body_timeout_secs", c.http.body_timeout_secs, 1),
        ("http.max_buffered_body_bytes", c.http.max_buffered_body_bytes, c.http.body_limit_bytes),
        ("auth.jwt.jwks_refresh_min_secs", c.auth.jwt.jwks_refresh_min_secs, 1),
        ("tasks.default_ttl_ms", c.tasks.default_ttl_ms, 1000),
        ("tasks.max_ttl_ms", c.tasks.max_ttl_ms, c.tasks.default_ttl_ms),
        ("tasks.poll_interval_ms", c.tasks.poll_interval_ms, 1),
        ("tasks.lease_ms", c.tasks.lease_ms, 300),
        ("tasks.max_attempts", c.tasks.max_attempts, 1),
        ("tasks.max_result_waiters", c.tasks.max_result_waiters, 1),
        ("tasks.max_result_waiters_per_principal", c.tasks.max_result_waiters_per_principal, 1),
        ("tasks.max_answer_bytes", c.tasks.max_answer_bytes, 1024),
        ("tasks.max_task_answer_bytes", c.tasks.max_task_answer_bytes, c.tasks.max_answer_bytes),
        ("store.shards", c.store.shards, 1),
        ("store.pool_size", c.store.pool_size, 1),
        ("store.command_timeout_ms", c.store.command_timeout_ms, 10),
        ("http.max_concurrent_requests", c.http.max_concurrent_requests, 1),
        ("http.sse_keepalive_secs", c.http.sse_keepalive_secs, 1),
        ("http.max_listeners", c.http.max_listeners, 1),
        ("http.max_listeners_per_principal", c.http.max_listeners_per_principal, 1),
        ("seal.session_ttl_secs", c.seal.session_ttl_secs, 1),
        ("seal.request_state_ttl_secs", c.seal.request_state_ttl_secs, 1),
        ("seal.max_bytes", c.seal.max_bytes, 1024),
        ("federation.list_refresh_secs", c.federation.list_refresh_secs, 1),
        ("federation.startup_wait_secs", c.federation.startup_wait_secs, 1),
    ] {
        if value < min {
            return Err(invalid_key(key, &format!("must be at least {min}")));
        }
    }
    for (key, value, max) in [
        ("limits.calls_per_minute", c.limits.calls_per_minute, MAX_PER_MINUTE),
        ("limits.calls_burst", c.limits.calls_burst, MAX_BURST),
        ("limits.tasks_per_minute", c.limits.tasks_per_minute, MAX_PER_MINUTE),
        ("limits.tasks_burst", c.limits.tasks_burst, MAX_BURST),
        ("limits.polls_per_minute", c.limits.polls_per_minute, MAX_PER_MINUTE),
        ("limits.polls_burst", c.limits.polls_burst, MAX_BURST),
        ("limits.upstream_calls_per_minute", c.limits.upstream_calls_per_minute, MAX_PER_MINUTE),
        ("limits.upstream_tasks_per_minute", c.limits.upstream_tasks_per_minute, MAX_PER_MINUTE),
        ("limits.max_running_tasks", c.limits.max_running_tasks, 1_000_000),
        ("limits.max_retained_tasks", c.limits.max_retained_tasks, 100_000_000),
        ("limits.max_stored_bytes", c.limits.max_stored_bytes, 1 << 50),
        ("http.body_limit_bytes", c.http.body_limit_bytes, 256 * 1024 * 1024),
        ("http.sse_keepalive_secs", c.http.sse_keepalive_secs, 3600),
        ("shutdown.drain_secs", c.shutdown.drain_secs, 3600),
        ("shutdown.grace_secs", c.shutdown.grace_secs, 3600),
        ("server.tool_timeout_secs", c.server.tool_timeout_secs, 86_400),
        ("store.shards", c.store.shards, 256),
        ("store.at_rest_window_secs", c.store.at_rest_window_secs, 30 * 86_400),
        ("store.replicas_ack", c.store.replicas_ack, 16),
        ("store.terminal_cache_entries", c.store.terminal_cache_entries, 10_000_000),
        ("store.terminal_cache_bytes", c.store.terminal_cache_bytes, 1 << 40),
        ("store.terminal_cache_record_bytes", c.store.terminal_cache_record_bytes, c.store.terminal_cache_bytes),
        ("tasks.max_attempts", c.tasks.max_attempts, 100),
        ("tasks.max_running", c.tasks.max_running, 100_000),
        ("tasks.answer_within_ms", c.tasks.answer_within_ms, 250),
    ] {
        if value > max {
            return Err(invalid_key(key, &format!("must be at most {max}")));
        }
    }
    validate_background(&c.background)?;
    for origin in &c.http.allowed_origins {
        if origin != "*" && parse_origin(origin).is_none() {
            return Err(invalid_key("http.allowed_origins", &format!("{origin:?} is not * or scheme://host[:port]")));
        }
    }
    if c.store.prefix.is_empty() || c.store.prefix.contains(['{', '}', ' ']) {
        return Err(invalid_key("store.prefix", "must be non-empty, without braces or spaces"));
    }
    if let Some(url) = &c.redis_url {
        let urls: Vec<&str> = url.split(',').map(str::trim).collect();
        if urls.len() > 1 && !c.store.cluster {
            return Err(invalid_key("redis_url", "several URLs need store.cluster = true (a Redis Cluster's seeds)"));
        }
        // The URL may carry a password: say which one is wrong, never echo it.
        if let Some(bad) = urls
            .iter()
            .position(|u| !(u.starts_with("redis://") || u.starts_with("rediss://") || u.starts_with("redis+unix://")))
        {
            return Err(invalid_key(
                "redis_url",
                &format!("must start with redis://, rediss:// or redis+unix:// (URL {} of {})", bad + 1, urls.len()),
            ));
        }
    }
    validate_sentinel(c)?;
    if c.store.replicas_ack > 0 {
        if !c.is_multi_replica() {
            return Err(invalid_key(
                "store.replicas_ack",
                "needs a Redis store (redis_url or store.sentinel): the memory store has no replicas",
            ));
        }
        if c.store.replicas_ack_timeout_ms == 0 {
            return Err(invalid_key(
                "store.replicas_ack_timeout_ms",
                "must be at least 1 (Redis reads WAIT's 0 as \"wait for ever\")",
            ));
        }
        if c.store.replicas_ack_timeout_ms >= c.store.command_timeout_ms {
            return Err(invalid_key(
                "store.replicas_ack_timeout_ms",
                &format!(
                    "must be below store.command_timeout_ms ({} ms): the write and its wait share that bound",
                    c.store.command_timeout_ms
                ),
            ));
        }
    }
    validate_tls_ca_file(c)?;
    if c.store.cluster && c.redis_url.is_none() {
        return Err(invalid_key("store.cluster", "needs redis_url (the cluster's seed nodes)"));
    }
    if !c.is_multi_replica() && c.tasks.max_running == 0 {
        return Err(invalid_key(
            "tasks.max_running",
            "0 (run no tasks) needs redis_url or store.sentinel: without a shared store no other replica can run them",
        ));
    }
    if c.is_multi_replica() && c.tasks.lease_ms < c.store.command_timeout_ms.saturating_mul(2) {
        return Err(invalid_key(
            "tasks.lease_ms",
            &format!(
                "must be at least twice store.command_timeout_ms ({} ms): a lease must outlive a renewal that \
                 timed out, or slow Redis replies would hand running tasks to other replicas",
                c.store.command_timeout_ms
            ),
        ));
    }
    validate_admin(c)?;
    if c.is_multi_replica() && c.seal.keys.is_empty() {
        return Err(invalid_key(
            "seal.keys",
            "required when redis_url or store.sentinel is set: every replica must share the same keys, or a session id or \
             requestState minted by one replica cannot be opened by another (generate one with --generate-seal-key)",
        ));
    }
    if !c.seal.keys.is_empty() {
        let specs: Vec<&str> = c.seal.keys.iter().map(|k| k.expose()).collect();
        mcpgate_seal::KeyRing::parse(&specs).map_err(|e| invalid_key_caused("seal.keys", SEAL_KEYS_ADVICE, e))?;
    }
    tracing_subscriber::EnvFilter::try_new(&c.log.level)
        .map_err(|e| invalid_key_caused("log.level", "not a valid filter", e))?;
    match (c.audit.sink, c.audit.path.as_deref().map(str::trim)) {
        (crate::config::AuditSink::File, None | Some("")) => {
            return Err(invalid_key("audit.path", "required with audit.sink = \"file\""));
        }
        (crate::config::AuditSink::Stdout, Some(_)) => {
            return Err(invalid_key("audit.path", "is only used with audit.sink = \"file\"; set that too"));
        }
        _ => {}
    }
    if let Some(resource) = &c.auth.resource {
        validate_resource_uri(resource)?;
    }
    match c.auth.mode {
        AuthMode::None => {
            if !c.listens_on_loopback() && !c.auth.allow_anonymous_non_loopback {
                return Err(invalid_key(
                    "auth.mode",
                    "auth.mode = none on a non-loopback address would let anyone act as the one anonymous \
                     principal; use auth.mode = jwt, or set auth.allow_anonymous_non_loopback = true",
                ));
            }
        }
        AuthMode::Jwt => validate_jwt(c)?,
    }
    // Auth `none` has no users: nobody to connect an account for, nobody to keep it from.
    if let Some(u) = c.upstream.iter().find(|u| u.is_oauth())
        && c.auth.mode != AuthMode::Jwt
    {
        return Err(invalid_key(
            "auth.mode",
            &format!(
                "upstream {:?} has auth = \"oauth\" (each caller's own account), which needs callers: set \
                 auth.mode = \"jwt\"",
                u.name
            ),
        ));
    }
    super::connect::validate(c)
}

/// `store.tls_ca_file`: only with a TLS connection to Redis to apply to (else the operator
/// believes traffic is encrypted that is not), and a file that holds a PEM certificate.
fn validate_tls_ca_file(c: &Config) -> Result<(), StartupError> {
    let Some(path) = &c.store.tls_ca_file else { return Ok(()) };
    let rediss = c.redis_url.as_deref().is_some_and(|u| u.split(',').any(|u| u.trim().starts_with("rediss://")));
    let sentinel_tls = c.store.sentinel.as_ref().is_some_and(|s| s.tls);
    if !rediss && !sentinel_tls {
        return Err(invalid_key(
            "store.tls_ca_file",
            "set, but no Redis connection uses TLS: use a rediss:// redis_url or store.sentinel.tls = true",
        ));
    }
    let pem = std::fs::read(path)
        .map_err(|e| invalid_key_caused("store.tls_ca_file", &format!("cannot read {path:?}"), e))?;
    if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
        return Err(invalid_key(
            "store.tls_ca_file",
            &format!("{path:?} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"),
        ));
    }
    Ok(())
}

/// `[store.sentinel]`: exclusive with `redis_url` and `store.cluster`, a master name, and
/// sentinel addresses that are `host:port`.
fn validate_sentinel(c: &Config) -> Result<(), StartupError> {
    let Some(sentinel) = &c.store.sentinel else { return Ok(()) };
    if c.redis_url.is_some() {
        return Err(invalid_key(
            "store.sentinel",
            "redis_url and store.sentinel are exclusive: the sentinels name the Redis primary (remove redis_url)",
        ));
    }
    if c.store.cluster {
        return Err(invalid_key(
            "store.sentinel",
            "store.cluster and store.sentinel are exclusive: a Sentinel set has one primary, not a cluster",
        ));
    }
    if sentinel.master_name.trim().is_empty() {
        return Err(invalid_key("store.sentinel.master_name", "required with [store.sentinel]"));
    }
    if sentinel.addresses.is_empty() {
        return Err(invalid_key("store.sentinel.addresses", "at least one sentinel host:port is required"));
    }
    if let Some(bad) = sentinel.addresses.iter().find(|a| {
        a.trim()
            .rsplit_once(':')
            .is_none_or(|(host, port)| host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0))
    }) {
        return Err(invalid_key("store.sentinel.addresses", &format!("{bad:?} is not host:port")));
    }
    Ok(())
}

/// Companion names are tool names (1 to 128 of `A-Za-z0-9_-.`) and distinct.
fn validate_background(b: &crate::config::BackgroundConfig) -> Result<(), StartupError> {
    let names = [
        ("background.status_tool", &b.status_tool),
        ("background.result_tool", &b.result_tool),
        ("background.cancel_tool", &b.cancel_tool),
    ];
    for (i, (key, name)) in names.iter().enumerate() {
        let valid = (1..=128).contains(&name.len())
            && name.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.'));
        if !valid {
            return Err(invalid_key(key, "must be 1 to 128 letters, digits, '_', '-' or '.'"));
        }
        if let Some((other, _)) = names[..i].iter().find(|(_, n)| n == name) {
            return Err(invalid_key(key, &format!("must differ from {other}")));
        }
    }
    if !(1..=3600).contains(&b.busy_retry_secs) {
        return Err(invalid_key("background.busy_retry_secs", "must be 1 to 3600"));
    }
    Ok(())
}

fn validate_resource_uri(resource: &str) -> Result<(), StartupError> {
    let ok = (resource.starts_with("https://") || resource.starts_with("http://")) && !resource.contains('#');
    if !ok {
        return Err(invalid_key("auth.resource", "must be an absolute http(s) URI without a fragment"));
    }
    Ok(())
}

fn validate_jwt(c: &Config) -> Result<(), StartupError> {
    let jwt = &c.auth.jwt;
    if jwt.issuer.as_deref().is_none_or(str::is_empty) {
        return Err(invalid_key("auth.jwt.issuer", "required when auth.mode = jwt"));
    }
    if jwt.audience.is_none() && c.auth.resource.is_none() {
        return Err(invalid_key(
            "auth.resource",
            "auth.resource (or auth.jwt.audience) is required when auth.mode = jwt",
        ));
    }
    if c.auth.authorization_servers.is_empty() {
        return Err(invalid_key(
            "auth.authorization_servers",
            "at least one authorization server is required when auth.mode = jwt (clients discover it from the \
             protected resource metadata)",
        ));
    }
    if jwt.algorithms.is_empty() {
        return Err(invalid_key("auth.jwt.algorithms", "at least one algorithm is required"));
    }
    for alg in &jwt.algorithms {
        if alg.parse::<jsonwebtoken::Algorithm>().is_err() {
            return Err(invalid_key("auth.jwt.algorithms", &format!("unknown algorithm {alg:?}")));
        }
    }
    let any_hs = jwt.algorithms.iter().any(|a| a.starts_with("HS"));
    if any_hs && jwt.hs256_secrets.is_empty() {
        return Err(invalid_key("auth.jwt.hs256_secrets", "an HS algorithm is allowed but no secret is configured"));
    }
    if !jwt.hs256_secrets.is_empty() && !jwt.algorithms.iter().any(|a| a == "HS256") {
        return Err(invalid_key("auth.jwt.algorithms", "hs256_secrets are configured but HS256 is not allowed"));
    }
    if jwt.hs256_secrets.iter().any(|s| s.expose().len() < 32) {
        return Err(invalid_key("auth.jwt.hs256_secrets", "every secret must be at least 32 bytes"));
    }
    let asymmetric = !jwt.public_key_files.is_empty() || jwt.jwks_file.is_some() || jwt.jwks_url.is_some();
    if jwt.hs256_secrets.is_empty() && !asymmetric {
        return Err(invalid_key(
            "auth.jwt.public_key_files",
            "no verification key: set hs256_secrets, public_key_files, jwks_file or jwks_url",
        ));
    }
    if let Some(url) = &jwt.jwks_url {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if authority.is_empty() || authority.contains('@') {
            return Err(invalid_key("auth.jwt.jwks_url", "must be an absolute URL without credentials"));
        }
        let allowed =
            scheme == "https" || (scheme == "http" && mcpgate_protocol::authority::is_loopback_authority(authority));
        if !allowed {
            return Err(invalid_key("auth.jwt.jwks_url", "must be https (plain http is allowed only on loopback)"));
        }
    }
    Ok(())
}

/// Normalizes `scheme://host[:port]` (lowercase, no path); `None` if it is not one.
pub fn parse_origin(origin: &str) -> Option<String> {
    let (scheme, authority) = origin.trim().split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    if !(scheme == "http" || scheme == "https") || authority.is_empty() || authority.contains(['/', '?', '#', '@', ' '])
    {
        return None;
    }
    Some(format!("{scheme}://{}", authority.to_ascii_lowercase()))
}

/// `[admin]`: a token worth the name, and a listener of its own.
fn validate_admin(c: &Config) -> Result<(), StartupError> {
    let Some(listen) = c.admin.listen else {
        if c.admin.private_metrics {
            return Err(invalid_key(
                "admin.private_metrics",
                "needs admin.listen: /metrics and /upstreams would be served nowhere",
            ));
        }
        return Ok(());
    };
    match &c.admin.token {
        None => return Err(invalid_key("admin.token", "required when admin.listen is set")),
        Some(token) if token.expose().chars().count() < 32 => {
            return Err(invalid_key("admin.token", "must be at least 32 characters (e.g. `openssl rand -base64 32`)"));
        }
        Some(_) => {}
    }
    // Port 0 picks a free port for each.
    if listen.port() != 0 && listen.port() == c.listen.port() {
        return Err(invalid_key(
            "admin.listen",
            "must differ from listen: the admin API never shares the MCP listener",
        ));
    }
    Ok(())
}
