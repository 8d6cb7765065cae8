//! A real Redis primary with one replica (`redis-server --replicaof`) on loopback, for the
//! tests of `store.replicas_ack`: both killed when dropped. Starting returns once the
//! replica's link is up (the primary lists it `online`), so a first `WAIT` can count it; a
//! replica thawed or restarted is waited for by its own replication offset (it has applied
//! what its primary had written), never by a guess at how long it takes.

use std::process::Command;
use std::time::Duration;

use super::RedisServer;
use super::wait::{Look, try_wait_for_blocking, wait_for_blocking};

/// A primary and its replica.
#[derive(Debug)]
pub struct RedisReplicated {
    primary: RedisServer,
    replica: RedisServer,
}

impl RedisReplicated {
    /// Starts both and waits (bounded) until the replica has synchronised.
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port().to_string()]);
        let set = Self { primary, replica };
        set.wait_until_replicated(Duration::from_secs(20));
        set
    }

    /// The primary (the store's `url`).
    pub fn primary(&self) -> &RedisServer {
        &self.primary
    }

    /// The replica (freeze it with [`RedisServer::pause`] to withhold acknowledgements).
    pub fn replica(&self) -> &RedisServer {
        &self.replica
    }

    /// Waits (up to `patience`) until the replica has applied everything the primary had
    /// written when called (e.g. once thawed): see [`RedisServer::wait_until_caught_up_with`].
    pub fn wait_until_caught_up(&self, patience: Duration) {
        self.replica.wait_until_caught_up_with(&self.primary, patience);
    }

    fn wait_until_replicated(&self, patience: Duration) {
        let port = self.primary.port().to_string();
        let online = try_wait_for_blocking(patience, Duration::from_millis(50), || {
            let info = Command::new(super::redis_cluster::cli())
                .args(["-p", &port, "info", "replication"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if info.contains("connected_slaves:1") && info.contains("state=online") {
                Look::Done(())
            } else {
                Look::NotYet(info)
            }
        });
        if let Err(info) = online {
            panic!("the replica did not come online within {patience:?}: {info}\n{}", self.replica.log());
        }
    }
}

impl RedisServer {
    /// The field `name` of this server's `INFO replication` (e.g. `master_repl_offset`), or
    /// `None` when it does not answer (frozen, stopped) or has no such field.
    pub fn replication_info(&self, name: &str) -> Option<String> {
        let out = Command::new(super::redis_cluster::cli())
            .args(["-p", &self.port().to_string(), "info", "replication"])
            .stdin(std::process::Stdio::null())
            .output()
            .ok()?;
        let info = String::from_utf8_lossy(&out.stdout).into_owned();
        info.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(':')).map(|v| v.trim().to_owned())
    }

    /// Waits (up to `patience`) until this server, a replica of `primary`, has applied
    /// everything `primary` had written when this was called: its own `slave_repl_offset`
    /// reaches the primary's `master_repl_offset` read first. A test that retries a write
    /// once a replica is back waits for this, not for a while: only then can the retry's
    /// `WAIT` be confirmed whatever the machine's load.
    ///
    /// # Panics
    ///
    /// When `primary` has no offset, or the replica does not reach it within `patience`.
    pub fn wait_until_caught_up_with(&self, primary: &RedisServer, patience: Duration) {
        let offset =
            |server: &RedisServer, field: &str| -> Option<u64> { server.replication_info(field)?.parse().ok() };
        let target = offset(primary, "master_repl_offset").expect("the primary answers its replication offset");
        let what = format!("the replica on port {} to reach its primary's offset {target}", self.port());
        wait_for_blocking(what, patience, Duration::from_millis(20), || {
            let reached = offset(self, "slave_repl_offset");
            if reached.is_some_and(|reached| reached >= target) { Look::Done(()) } else { Look::not_yet(reached) }
        });
    }
}
