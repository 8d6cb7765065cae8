//! Validation of `[[upstream]]` tables: what the types alone cannot check (names, the keys
//! each transport needs and refuses, timeouts and bounds, URLs, globs, overrides), one table
//! at a time and across the whole list (unique names, renames that do not collide).
//!
//! Invariant: every error names the upstream and the key, never a value (values may be
//! secrets).

use std::collections::BTreeMap;

use super::{EraChoice, TransportKind, UpstreamAuth, UpstreamConfig, redact_url};
use crate::error::UpstreamError;

impl UpstreamConfig {
    /// Checks what the types alone cannot.
    pub fn validate(&self) -> Result<(), UpstreamError> {
        let bad = |key: &str, problem: String| UpstreamError::Config {
            upstream: self.name.clone(),
            key: key.to_owned(),
            problem,
            source: None,
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
            let bad = |key: String, problem: String| UpstreamError::Config {
                upstream: self.name.clone(),
                key,
                problem,
                source: None,
            };
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
                source: None,
            });
        }
        for (tool, rename) in u.overrides.iter().filter_map(|(t, o)| Some((t, o.rename.as_deref()?))) {
            if let Some(other) = renames.insert(rename, &u.name) {
                return Err(UpstreamError::Config {
                    upstream: u.name.clone(),
                    key: format!("overrides.{tool}.rename"),
                    problem: format!("upstream {other} renames a tool to {rename:?} too"),
                    source: None,
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
                    source: None,
                });
            }
        }
    }
    Ok(())
}
