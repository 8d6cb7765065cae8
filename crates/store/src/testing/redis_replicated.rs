//! A real Redis primary with one replica (`redis-server --replicaof`) on loopback, for the
//! tests of `store.replicas_ack`: both killed when dropped. Starting returns once the
//! replica's link is up (the primary lists it `online`), so a first `WAIT` can count it.

use std::process::Command;
use std::time::Duration;

use tokio::time::Instant;

use super::RedisServer;

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

    fn wait_until_replicated(&self, patience: Duration) {
        let deadline = Instant::now() + patience;
        let port = self.primary.port().to_string();
        loop {
            let info = Command::new(super::redis_cluster::cli())
                .args(["-p", &port, "info", "replication"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            if info.contains("connected_slaves:1") && info.contains("state=online") {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the replica did not come online within {patience:?}: {info}\n{}",
                self.replica.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}
