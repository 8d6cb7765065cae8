//! What this replica says of itself in the fleet's heartbeats that does not change while it
//! runs: its id, a hash of its configuration, when it started.
//!
//! The configuration hash is SHA-256 of the configuration's `Debug` rendering, in which a
//! `Secret` never shows, nor an upstream's header or environment values, arguments or a
//! URL's userinfo and query (and with `redis_url`'s user and password left out): equal for
//! replicas started with the same settings by the same build, different when a setting it
//! shows differs (so not when only an upstream's arguments or a secret differ). It is not a
//! secret and reveals no secret.

use sha2::{Digest as _, Sha256};

use crate::config::Config;

/// What a replica says of itself that does not change while it runs.
#[derive(Debug, Clone)]
pub(crate) struct Member {
    /// Its id in the fleet (its seal key ring record's).
    pub(crate) replica: String,
    /// SHA-256 (hex) of its configuration without secrets.
    pub(crate) config_hash: String,
    /// When it started, Unix ms.
    pub(crate) started_ms: u64,
}

impl Member {
    /// This replica, started now with `config`.
    pub(crate) fn new(replica: String, config: &Config) -> Self {
        let started_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Self { replica, config_hash: config_hash(config), started_ms }
    }
}

/// SHA-256 (lowercase hex) of `config` without its secrets (see the module docs).
pub(crate) fn config_hash(config: &Config) -> String {
    let mut config = config.clone();
    config.redis_url = config.redis_url.as_deref().map(without_userinfo);
    let digest = Sha256::digest(format!("{config:?}").as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// `url` without the `user:password@` of its authority.
fn without_userinfo(url: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::without_userinfo;

    #[test]
    fn urls_lose_their_credentials() {
        assert_eq!(without_userinfo("redis://:pw@host:6379/0"), "redis://host:6379/0");
        assert_eq!(without_userinfo("rediss://u:p@ss@h/1"), "rediss://h/1");
        assert_eq!(without_userinfo("redis://host:6379"), "redis://host:6379");
    }
}
