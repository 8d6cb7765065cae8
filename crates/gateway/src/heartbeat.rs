//! This replica's heartbeat: every [`BEAT`] it records in the store who it is (the id its
//! seal key ring record uses), its version, a hash of its configuration, when it started,
//! the tasks running on it and whether it drains, so any replica can show the live fleet
//! (`GET /admin/fleet`). A record lives [`LIVE`] (three missed beats); the replica removes
//! it when it stops.
//!
//! The configuration hash is SHA-256 of the configuration's `Debug` rendering, in which a
//! `Secret` never shows (and with `redis_url`'s user and password left out): equal for
//! replicas started with the same settings by the same build, different when any setting
//! differs. It is not a secret and reveals no secret.

use std::time::Duration;

use mcpgate_store::{Fleet as _, Heartbeat};
use sha2::{Digest as _, Sha256};

use crate::config::Config;
use crate::state::AppState;

/// How often a replica writes its heartbeat.
pub(crate) const BEAT: Duration = Duration::from_secs(5);

/// How long a heartbeat lives unrefreshed: three missed beats.
pub(crate) const LIVE: Duration = Duration::from_secs(15);

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

/// Writes this replica's heartbeat now (also right after a drain, so the fleet sees it at
/// once). A failure is logged: the next beat tries again.
pub(crate) async fn beat(state: &AppState) {
    let member = &state.member;
    let workers = state.tasks.workers();
    let beat = Heartbeat {
        replica: member.replica.clone(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        config_hash: member.config_hash.clone(),
        started_ms: member.started_ms,
        tasks_running: u64::try_from(workers.running()).unwrap_or(u64::MAX),
        draining: workers.is_draining(),
        written_ms: 0,
    };
    match state.store.beat(&beat, LIVE).await {
        Ok(true) => {}
        Ok(false) => tracing::warn!("the store lists as many replicas as it holds: this one is not listed"),
        Err(e) => {
            tracing::debug!(error = &e as &dyn std::error::Error, "writing this replica's heartbeat failed; retried")
        }
    }
}

/// Writes the heartbeat every [`BEAT`] until the replica starts stopping, then removes it
/// (on the state's tracker, which shutdown waits for, so the removal is done before the
/// process exits).
pub(crate) fn spawn(state: AppState) {
    let tracker = state.in_flight.clone();
    tracker.spawn(async move {
        loop {
            beat(&state).await;
            tokio::select! {
                () = tokio::time::sleep(BEAT) => {}
                () = state.stopping.cancelled() => break,
            }
        }
        if let Err(e) = state.store.leave(&state.member.replica).await {
            tracing::debug!(
                error = &e as &dyn std::error::Error,
                "removing this replica's heartbeat failed; it lapses"
            );
        }
    });
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
