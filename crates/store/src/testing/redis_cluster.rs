//! A real Redis Cluster on loopback: N `redis-server` masters with cluster mode on (and,
//! if asked, one replica each), joined with `redis-cli --cluster create`, each in its own
//! temp dir, all killed when dropped; a test may kill a node to make its replica take over. The
//! CLI is `MCPGATE_REDIS_CLI` or `redis-cli` on `PATH` (Debian: redis-tools, installed with
//! redis-server).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use super::RedisServer;
use super::wait::{Look, wait_for_blocking};

/// A running cluster.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
    /// Nodes killed by the test (not asked whether the cluster is ok).
    killed: Vec<bool>,
}

impl RedisCluster {
    /// Starts `masters` nodes (at least 3) and waits until the cluster serves every slot.
    pub fn start(masters: usize) -> Self {
        Self::create(masters.max(3), 0)
    }

    /// Starts `masters` primaries (at least 3) each with one replica (`--cluster-replicas 1`:
    /// 2 × masters nodes), and waits until the cluster serves every slot and every replica
    /// is in sync with its primary (so a first `WAIT 1` counts it).
    pub fn start_with_replicas(masters: usize) -> Self {
        let cluster = Self::create(masters.max(3), 1);
        cluster.wait_for_replicas(Duration::from_secs(30));
        cluster
    }

    fn create(masters: usize, replicas: usize) -> Self {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
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
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
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
        let killed = vec![false; nodes.len()];
        let cluster = Self { nodes, killed };
        cluster.wait_until_ok(Duration::from_secs(20));
        cluster
    }

    /// Waits (up to `patience`) until every node not killed says `cluster_state:ok` and
    /// every slot has a live primary: after a primary's death, until its replica took over.
    pub fn wait_until_ok(&self, patience: Duration) {
        wait_for_blocking("every live node to say cluster_state:ok", patience, Duration::from_millis(100), || {
            let not_ok: Vec<u16> = self
                .live()
                .filter(|(_, node)| !self.run(node, &["cluster", "info"]).contains("cluster_state:ok"))
                .map(|(_, node)| node.port())
                .collect();
            if not_ok.is_empty() { Look::Done(()) } else { Look::NotYet(format!("not ok on ports {not_ok:?}")) }
        });
    }

    /// Kills node `index` (SIGKILL: no goodbye to the cluster or to clients).
    pub fn kill_node(&mut self, index: usize) {
        self.nodes[index].stop();
        self.killed[index] = true;
    }

    /// Starts killed node `index` again on its port and directory: it rejoins the cluster
    /// (its `nodes.conf` survives), as a replica of whichever node took over its slots.
    pub fn restart_node(&mut self, index: usize) {
        self.nodes[index].restart();
        self.killed[index] = false;
    }

    /// The index of the node serving `slot` as primary, as the live nodes see it (`None`
    /// while no live primary serves it).
    pub fn primary_of_slot(&self, slot: u16) -> Option<usize> {
        let (_, asked) = self.live().next()?;
        let nodes = self.run(asked, &["cluster", "nodes"]);
        nodes.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (address, flags) = (fields.get(1)?, fields.get(2)?);
            if !flags.contains("master") || flags.contains("fail") {
                return None;
            }
            let serves = fields.iter().skip(8).any(|range| {
                let (low, high) = range.split_once('-').unwrap_or((range, range));
                matches!((low.parse::<u16>(), high.parse::<u16>()), (Ok(l), Ok(h)) if (l..=h).contains(&slot))
            });
            let port: u16 = address.split(['@']).next()?.rsplit(':').next()?.parse().ok()?;
            if !serves {
                return None;
            }
            self.nodes.iter().position(|n| n.port() == port)
        })
    }

    /// Waits (up to `patience`) until a node other than `dead` serves `slot` as primary
    /// (its replica was promoted) and the cluster is ok again; returns that node's index.
    pub fn wait_for_new_primary(&self, slot: u16, dead: usize, patience: Duration) -> usize {
        let deadline = Instant::now() + patience;
        let primary = wait_for_blocking(
            format_args!("a replica to take over slot {slot} from node {dead}"),
            patience,
            Duration::from_millis(100),
            || match self.primary_of_slot(slot) {
                Some(primary) if primary != dead => Look::Done(primary),
                seen => Look::NotYet(format!("slot {slot} served by node {seen:?}")),
            },
        );
        self.wait_until_ok(deadline.saturating_duration_since(Instant::now()));
        primary
    }

    /// The slot of `key` (`CLUSTER KEYSLOT`, asked of a live node).
    pub fn slot_of(&self, key: &str) -> u16 {
        let (_, node) = self.live().next().expect("a live node");
        let out = self.run(node, &["cluster", "keyslot", key]);
        out.trim().parse().unwrap_or_else(|_| panic!("CLUSTER KEYSLOT {key} answered {out:?}"))
    }

    /// Waits (up to `patience`) until every live primary has a replica in sync
    /// (`connected_slaves` ≥ 1, `state=online`).
    pub fn wait_for_replicas(&self, patience: Duration) {
        wait_for_blocking("the cluster's replicas to sync", patience, Duration::from_millis(100), || {
            let unsynced: Vec<u16> = self
                .live()
                .filter(|(_, node)| {
                    let info = self.run(node, &["info", "replication"]);
                    info.contains("role:master")
                        && (!info.contains("state=online") || info.contains("connected_slaves:0"))
                })
                .map(|(_, node)| node.port())
                .collect();
            if unsynced.is_empty() {
                Look::Done(())
            } else {
                Look::NotYet(format!("primaries without a synced replica on ports {unsynced:?}"))
            }
        });
    }

    fn live(&self) -> impl Iterator<Item = (usize, &RedisServer)> {
        self.nodes.iter().enumerate().filter(|(i, _)| !self.killed[*i])
    }

    /// `redis-cli -p <node> args...`'s output ('' if it could not run).
    fn run(&self, node: &RedisServer, args: &[&str]) -> String {
        Command::new(cli())
            .args(["-p", &node.port().to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
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
