//! A real Redis Sentinel set on loopback: one primary and two replicas (`redis-server
//! --replicaof`), watched by three sentinels that agree (quorum 2) on a failover, each process
//! in its own temp dir on an ephemeral port, all killed when dropped. The sentinel binary is
//! `MCPGATE_REDIS_SENTINEL`, else `redis-sentinel` on `PATH`, else `redis-server <conf>
//! --sentinel` (the same program). Sentinel timing is quick for tests: a primary is down
//! after 1 s of silence, a failover may take 5 s.
//!
//! Invariant: `start` returns only once every sentinel sees both replicas and the other two
//! sentinels, so a failover can be agreed at once; every wait is bounded.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::RedisServer;
use super::redis_server::answering;
use super::wait::{Look, try_wait_for_blocking, wait_for_blocking};

/// The name the sentinels monitor the primary under.
const MASTER_NAME: &str = "mcpgate-primary";

/// A running Sentinel set.
#[derive(Debug)]
pub struct RedisSentinelSet {
    /// The data nodes; the first is the primary at the start.
    nodes: Vec<RedisServer>,
    sentinels: Vec<Sentinel>,
    /// Port of the node the harness last knew as primary.
    primary: u16,
}

/// One sentinel process.
#[derive(Debug)]
struct Sentinel {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

impl RedisSentinelSet {
    /// Starts the primary, two replicas and three sentinels, and waits (bounded) until the
    /// replicas are in sync and the sentinels know each other.
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let port = primary.port().to_string();
        let replicas: Vec<RedisServer> =
            (0..2).map(|_| RedisServer::start_with(&["--replicaof", "127.0.0.1", &port])).collect();
        let mut nodes = vec![primary];
        nodes.extend(replicas);
        let primary = nodes[0].port();
        for replica in &nodes[1..] {
            wait_for(Duration::from_secs(20), "a replica to sync with the primary", || {
                info(replica.port(), "replication").contains("master_link_status:up")
            });
        }
        let sentinels = (0..3).map(|_| Sentinel::start(primary)).collect();
        let set = Self { nodes, sentinels, primary };
        for sentinel in &set.sentinels {
            wait_for(Duration::from_secs(30), "every sentinel to see two replicas and two other sentinels", || {
                let master = cli(sentinel.port, &["SENTINEL", "MASTER", MASTER_NAME]);
                field(&master, "num-slaves") == Some("2") && field(&master, "num-other-sentinels") == Some("2")
            });
        }
        set
    }

    /// The sentinels, `127.0.0.1:<port>` each.
    pub fn sentinel_addresses(&self) -> Vec<String> {
        self.sentinels.iter().map(|s| format!("127.0.0.1:{}", s.port)).collect()
    }

    /// The name the sentinels know the primary by.
    pub fn master_name(&self) -> &str {
        MASTER_NAME
    }

    /// The port of the primary as the harness last knew it (at the start, or as returned by
    /// [`RedisSentinelSet::wait_for_new_primary`]).
    pub fn primary_port(&self) -> u16 {
        self.primary
    }

    /// Kills the primary (SIGKILL) and waits for it to be gone.
    pub fn kill_primary(&mut self) {
        let primary = self.primary;
        let node = self.nodes.iter_mut().find(|n| n.port() == primary).expect("the primary is one of the nodes");
        node.stop();
    }

    /// Waits until the sentinels name a primary other than the one killed, and that node says
    /// it is a master; returns its port. Panics (with the sentinels' logs) after `timeout`.
    pub fn wait_for_new_primary(&mut self, timeout: Duration) -> u16 {
        let old = self.primary;
        let promoted = try_wait_for_blocking(timeout, Duration::from_millis(100), || {
            let named = self.sentinels.iter().find_map(|s| {
                let reply = cli(s.port, &["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME]);
                reply.lines().nth(1).and_then(|p| p.trim().parse::<u16>().ok())
            });
            match named {
                Some(port) if port != old && info(port, "replication").contains("role:master") => Look::Done(port),
                named => Look::NotYet(format!("the sentinels name port {named:?}")),
            }
        });
        let port = promoted.unwrap_or_else(|seen| {
            panic!(
                "no new primary within {timeout:?} after the primary on port {old} died ({seen}); sentinel logs:\n{}",
                self.sentinel_logs()
            )
        });
        self.primary = port;
        port
    }

    /// Waits until both replicas have applied everything the primary has written so far.
    pub fn wait_for_replicas_in_sync(&self, timeout: Duration) {
        let written = field_colon(&info(self.primary, "replication"), "master_repl_offset").unwrap_or(0);
        for replica in self.nodes.iter().filter(|n| n.port() != self.primary) {
            wait_for(timeout, "a replica to catch up with the primary's writes", || {
                field_colon(&info(replica.port(), "replication"), "slave_repl_offset").is_some_and(|o| o >= written)
            });
        }
    }

    /// Asks a sentinel for a graceful failover (the sentinels demote the primary and close its
    /// clients' connections). Returns the old primary's port; follow with
    /// [`RedisSentinelSet::wait_for_new_primary`].
    pub fn failover(&mut self) -> u16 {
        let reply = cli(self.sentinels[0].port, &["SENTINEL", "FAILOVER", MASTER_NAME]);
        assert!(reply.trim() == "OK", "SENTINEL FAILOVER refused: {reply}");
        self.primary
    }

    /// Moves the primary role to a replica by hand, as when a primary cut off from the
    /// sentinels rejoins as a replica: the old primary becomes a replica with its clients still
    /// connected (their writes meet `-READONLY`), and the sentinels are re-pointed at the new
    /// one. Returns the new primary's port.
    pub fn demote_primary_under_its_clients(&mut self) -> u16 {
        let old = self.primary;
        let new = self.nodes.iter().map(RedisServer::port).find(|p| *p != old).expect("a replica");
        for sentinel in &self.sentinels {
            cli(sentinel.port, &["SENTINEL", "REMOVE", MASTER_NAME]);
        }
        assert_eq!(cli(new, &["REPLICAOF", "NO", "ONE"]).trim(), "OK", "promoting the replica on port {new}");
        assert_eq!(
            cli(old, &["REPLICAOF", "127.0.0.1", &new.to_string()]).trim(),
            "OK",
            "demoting the primary on port {old}"
        );
        for sentinel in &self.sentinels {
            let reply = cli(sentinel.port, &["SENTINEL", "MONITOR", MASTER_NAME, "127.0.0.1", &new.to_string(), "2"]);
            assert_eq!(reply.trim(), "OK", "re-pointing a sentinel at the new primary");
        }
        self.primary = new;
        new
    }

    /// The data nodes (the killed one too, stopped).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// Every sentinel's log so far.
    pub fn sentinel_logs(&self) -> String {
        self.sentinels
            .iter()
            .map(|s| format!("--- sentinel {} ---\n{}", s.port, s.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Sentinel {
    /// Starts a sentinel monitoring the primary on `primary`, retrying on another port if the
    /// one probed was taken meanwhile.
    fn start(primary: u16) -> Self {
        let mut last = String::new();
        for _ in 0..5 {
            let dir = tempfile::tempdir().expect("temp dir for a sentinel");
            let port =
                std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            match spawn(dir.path(), port, primary) {
                Ok(child) => return Self { child, port, dir },
                Err(e) => {
                    last =
                        format!("{e}\n{}", std::fs::read_to_string(dir.path().join("sentinel.log")).unwrap_or_default())
                }
            }
        }
        panic!("a sentinel did not start: {last}");
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sentinel.log")).unwrap_or_default()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes the sentinel's config (it rewrites it as it learns the topology, so it must be
/// writable) and runs it until it answers `PING`.
fn spawn(dir: &Path, port: u16, primary: u16) -> Result<Child, String> {
    let conf = dir.join("sentinel.conf");
    let text = format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\ndir {dir}\nlogfile {log}\n\
         sentinel monitor {MASTER_NAME} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {MASTER_NAME} 1000\n\
         sentinel failover-timeout {MASTER_NAME} 5000\n\
         sentinel parallel-syncs {MASTER_NAME} 1\n",
        dir = dir.display(),
        log = dir.join("sentinel.log").display(),
    );
    std::fs::write(&conf, text).map_err(|e| format!("cannot write {}: {e}", conf.display()))?;
    let mut cmd =
        match std::env::var_os("MCPGATE_REDIS_SENTINEL").map(PathBuf::from).or_else(|| on_path("redis-sentinel")) {
            Some(binary) => {
                let mut cmd = Command::new(binary);
                cmd.arg(&conf);
                cmd
            }
            None => {
                let server = std::env::var_os("MCPGATE_REDIS_SERVER")
                    .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from);
                let mut cmd = Command::new(server);
                cmd.arg(&conf).arg("--sentinel");
                cmd
            }
        };
    let mut child = cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).spawn().map_err(|e| {
        format!("cannot run a sentinel: {e}. Install the Debian package redis-sentinel (./scripts/test does)")
    })?;
    answering(&mut child, port, "the sentinel")?;
    Ok(child)
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| std::env::split_paths(&paths).map(|p| p.join(name)).find(|p| p.is_file()))
}

/// Runs `redis-cli -p <port> <args>` and returns its output ("" when it cannot run).
fn cli(port: u16, args: &[&str]) -> String {
    let binary: PathBuf = std::env::var_os("MCPGATE_REDIS_CLI").map_or_else(|| "redis-cli".into(), PathBuf::from);
    Command::new(binary)
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

fn info(port: u16, section: &str) -> String {
    cli(port, &["INFO", section])
}

/// The value after `name` in a flat reply printed one item per line (`SENTINEL MASTER`).
fn field<'a>(reply: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = reply.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next().map(str::trim);
        }
    }
    None
}

/// The number after `name:` in an `INFO` reply.
fn field_colon(reply: &str, name: &str) -> Option<u64> {
    reply.lines().find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(':')?.parse().ok())
}

fn wait_for(timeout: Duration, what: &str, ready: impl FnMut() -> bool) {
    wait_for_blocking(what, timeout, Duration::from_millis(100), ready);
}
