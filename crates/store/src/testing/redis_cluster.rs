//! A real Redis Cluster on loopback: N `redis-server` masters with cluster mode on, joined
//! with `redis-cli --cluster create`, each in its own temp dir, all killed when dropped. The
//! CLI is `MCPGATE_REDIS_CLI` or `redis-cli` on `PATH` (Debian: redis-tools, installed with
//! redis-server).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use super::RedisServer;

/// A running cluster.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` nodes (at least 3) and waits until the cluster serves every slot.
    pub fn start(masters: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..masters.max(3))
            .map(|_| {
                RedisServer::start_with(&[
                    "--cluster-enabled",
                    "yes",
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    "2000",
                ])
            })
            .collect();
        let cli = cli();
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port())).collect();
        let output = Command::new(&cli)
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot run {}: {e}. Install the Debian package redis-tools (./scripts/test installs redis-server, \
                     which brings it) or set MCPGATE_REDIS_CLI",
                    cli.display()
                )
            });
        assert!(
            output.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&output.stdout)
        );
        let cluster = Self { nodes };
        cluster.wait_until_ok(&cli);
        cluster
    }

    fn wait_until_ok(&self, cli: &PathBuf) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let ok = self.nodes.iter().all(|node| {
                Command::new(cli)
                    .args(["-p", &node.port().to_string(), "cluster", "info"])
                    .output()
                    .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
            });
            if ok {
                return;
            }
            assert!(Instant::now() < deadline, "the cluster never reached cluster_state:ok");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Every node's URL, comma-separated (the seed list for `redis_url`).
    pub fn urls(&self) -> String {
        self.nodes.iter().map(RedisServer::url).collect::<Vec<_>>().join(",")
    }

    /// The nodes.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }
}

/// The `redis-cli` binary: `MCPGATE_REDIS_CLI` or `redis-cli` on `PATH`.
pub(super) fn cli() -> PathBuf {
    std::env::var_os("MCPGATE_REDIS_CLI").map_or_else(|| "redis-cli".into(), PathBuf::from)
}
