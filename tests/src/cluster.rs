//! A whole deployment on loopback: one `redis-server` (or a Redis Cluster, or a Sentinel set),
//! N `mcpgate` replicas sharing it (and one set of sealing keys), and `nginx` round-robin in
//! front. Everything is killed when the cluster drops; on a failing test every replica's log is
//! printed.

use std::collections::HashMap;
use std::time::Duration;

use anyhow::Context;
use mcpgate_store::testing::{RedisCluster, RedisSentinelSet, RedisServer};

use crate::gateway::Gateway;
use crate::nginx::Nginx;
use crate::wait::{Look, PATIENCE, wait_for, wait_for_blocking};

/// Sealing keys every replica of a test cluster shares.
pub const CLUSTER_SEAL_KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// Redis + replicas + nginx.
#[derive(Debug)]
pub struct Cluster {
    /// The replicas (`None` once killed).
    pub replicas: Vec<Option<Gateway>>,
    /// The shared Redis.
    redis: Redis,
    nginx: Nginx,
    env: Vec<(String, String)>,
    args: Vec<String>,
    /// Each replica's address (kept when it stops, so a restart takes the same place in
    /// nginx's upstream list).
    addrs: Vec<String>,
    /// Per-replica environment given at build time.
    per_replica: HashMap<usize, Vec<(String, String)>>,
}

/// Builds a cluster.
#[derive(Debug, Default)]
pub struct ClusterBuilder {
    replicas: usize,
    env: HashMap<String, String>,
    per_replica: HashMap<usize, Vec<(String, String)>>,
    args: Vec<String>,
    redis_args: Vec<String>,
    redis_cluster: Option<usize>,
    redis_sentinel: bool,
    /// The Redis Cluster's primaries each have a replica.
    redis_cluster_replicas: bool,
}

/// The Redis the replicas share.
#[derive(Debug)]
enum Redis {
    Server(RedisServer),
    Cluster(RedisCluster),
    Sentinel(RedisSentinelSet),
}

impl ClusterBuilder {
    /// A Redis Cluster of `masters` nodes instead of one server.
    pub fn redis_cluster(mut self, masters: usize) -> Self {
        self.redis_cluster = Some(masters);
        self
    }

    /// A Redis Sentinel set (primary, two replicas, three sentinels) instead of one server:
    /// the replicas get the sentinels (`MCPGATE_STORE_SENTINEL_*`), not `MCPGATE_REDIS_URL`.
    pub fn redis_sentinel(mut self) -> Self {
        self.redis_sentinel = true;
        self
    }

    /// A Redis Cluster of `masters` primaries, each with a replica (a fault test kills a
    /// primary through [`Cluster::redis_cluster_mut`] and its replica takes over).
    pub fn redis_cluster_with_replicas(mut self, masters: usize) -> Self {
        self.redis_cluster = Some(masters);
        self.redis_cluster_replicas = true;
        self
    }

    /// Extra `redis-server` arguments (e.g. AOF settings).
    pub fn redis_args(mut self, args: &[&str]) -> Self {
        self.redis_args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Sets an environment variable on every replica.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Sets an environment variable on one replica (by index).
    pub fn replica_env(mut self, index: usize, key: &str, value: &str) -> Self {
        self.per_replica.entry(index).or_default().push((key.to_owned(), value.to_owned()));
        self
    }

    /// Adds command-line arguments for every replica.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Starts everything.
    pub fn start(self) -> anyhow::Result<Cluster> {
        let (redis, store_env) = match self.redis_cluster {
            _ if self.redis_sentinel => {
                let set = RedisSentinelSet::start();
                let env = vec![
                    ("MCPGATE_STORE_SENTINEL_MASTER_NAME".to_owned(), set.master_name().to_owned()),
                    ("MCPGATE_STORE_SENTINEL_ADDRESSES".to_owned(), set.sentinel_addresses().join(",")),
                ];
                (Redis::Sentinel(set), env)
            }
            Some(masters) => {
                let cluster = if self.redis_cluster_replicas {
                    RedisCluster::start_with_replicas(masters)
                } else {
                    RedisCluster::start(masters)
                };
                let env = vec![
                    ("MCPGATE_REDIS_URL".to_owned(), cluster.urls()),
                    ("MCPGATE_STORE_CLUSTER".to_owned(), "true".to_owned()),
                ];
                (Redis::Cluster(cluster), env)
            }
            None => {
                let server = RedisServer::start_with(&self.redis_args.iter().map(String::as_str).collect::<Vec<_>>());
                let env = vec![("MCPGATE_REDIS_URL".to_owned(), server.url())];
                (Redis::Server(server), env)
            }
        };
        let mut env: Vec<(String, String)> = store_env;
        env.extend([
            ("MCPGATE_SEAL_KEYS".to_owned(), CLUSTER_SEAL_KEYS.to_owned()),
            ("MCPGATE_LOG_LEVEL".to_owned(), "info".to_owned()),
        ]);
        env.extend(self.env);
        let mut replicas = Vec::with_capacity(self.replicas);
        for i in 0..self.replicas {
            let mut builder = Gateway::builder().args(&self.args.iter().map(String::as_str).collect::<Vec<_>>());
            for (k, v) in env.iter().chain(self.per_replica.get(&i).into_iter().flatten()) {
                builder = builder.env(k, v);
            }
            replicas.push(Some(builder.start().with_context(|| format!("starting replica {i}"))?));
        }
        let addrs: Vec<String> = replicas.iter().flatten().map(|g| g.addr().to_owned()).collect();
        let nginx = Nginx::start(&addrs)?;
        Ok(Cluster { replicas, redis, nginx, env, args: self.args, addrs, per_replica: self.per_replica })
    }
}

impl Cluster {
    /// Index of the replica running a task now, from each replica's `/metrics`.
    pub async fn executing_replica(&self, client: &crate::Client) -> anyhow::Result<Option<usize>> {
        for (i, replica) in self.replicas.iter().enumerate() {
            let Some(replica) = replica else { continue };
            let (_, text) = client.get(&format!("http://{}/metrics", replica.addr())).await?;
            if text.lines().any(|l| l.starts_with("mcpgate_tasks_running ") && !l.ends_with(" 0")) {
                return Ok(Some(i));
            }
        }
        Ok(None)
    }

    /// Index of the replica running the (only) task, once one picked it up (bounded wait).
    ///
    /// # Panics
    ///
    /// When no replica runs a task within [`PATIENCE`].
    pub async fn executing_replica_soon(&self, client: &crate::Client) -> anyhow::Result<usize> {
        Ok(wait_for("a replica to run the task", PATIENCE, async || self.executing_replica(client).await).await)
    }

    /// A cluster of `replicas` replicas.
    pub fn builder(replicas: usize) -> ClusterBuilder {
        ClusterBuilder { replicas, ..ClusterBuilder::default() }
    }

    /// The load balancer's MCP URL (`localhost`, which the replicas accept as a host).
    pub fn url(&self) -> String {
        format!("http://localhost:{}/mcp", self.nginx.addr().rsplit(':').next().unwrap_or_default())
    }

    /// Replica `i`'s MCP URL.
    pub fn replica_url(&self, i: usize) -> String {
        self.replica(i).url()
    }

    /// Replica `i` (panics if it was killed).
    pub fn replica(&self, i: usize) -> &Gateway {
        self.replicas[i].as_ref().expect("replica is running")
    }

    /// `kill -9` of replica `i`.
    pub fn kill(&mut self, i: usize) {
        if let Some(mut gateway) = self.replicas[i].take() {
            gateway.kill();
        }
    }

    /// The one Redis server (panics for a cluster on a Redis Cluster).
    pub fn redis(&mut self) -> &mut RedisServer {
        match &mut self.redis {
            Redis::Server(server) => server,
            Redis::Cluster(_) => panic!("this cluster runs on a Redis Cluster"),
            Redis::Sentinel(_) => panic!("this cluster runs on a Redis Sentinel set"),
        }
    }

    /// The Redis Cluster, when the replicas share one.
    pub fn redis_cluster(&self) -> Option<&RedisCluster> {
        match &self.redis {
            Redis::Cluster(cluster) => Some(cluster),
            Redis::Server(_) | Redis::Sentinel(_) => None,
        }
    }

    /// The Redis Sentinel set, when the replicas share one (to kill its primary).
    pub fn redis_sentinel(&mut self) -> Option<&mut RedisSentinelSet> {
        match &mut self.redis {
            Redis::Sentinel(set) => Some(set),
            Redis::Server(_) | Redis::Cluster(_) => None,
        }
    }

    /// The Redis Cluster, to kill and restart its nodes.
    pub fn redis_cluster_mut(&mut self) -> Option<&mut RedisCluster> {
        match &mut self.redis {
            Redis::Cluster(cluster) => Some(cluster),
            Redis::Server(_) | Redis::Sentinel(_) => None,
        }
    }

    /// SIGTERM to replica `i`, waiting (bounded) for its graceful exit.
    pub fn stop(&mut self, i: usize) -> anyhow::Result<()> {
        if let Some(mut gateway) = self.replicas[i].take() {
            gateway.terminate()?;
            let status = gateway.wait(Duration::from_secs(30))?;
            anyhow::ensure!(status.success(), "replica {i} exited with {status}\n{}", gateway.logs());
        }
        Ok(())
    }

    /// Starts replica `i` again (after `kill` or `stop`) on its old address, so nginx routes
    /// to it again, with `extra` environment on top (e.g. rotated keys).
    pub fn restart(&mut self, i: usize, extra: &[(&str, &str)]) -> anyhow::Result<()> {
        anyhow::ensure!(self.replicas[i].is_none(), "replica {i} is running");
        let addr = self.addrs[i].clone();
        let mut args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        args.extend(["--listen", addr.as_str()]);
        // The old process's port may take a moment to be free.
        let gateway = wait_for_blocking(format!("replica {i} to start again on {addr}"), PATIENCE, || {
            let mut builder = Gateway::builder().args(&args);
            for (k, v) in self.env.iter().chain(self.per_replica.get(&i).into_iter().flatten()) {
                builder = builder.env(k, v);
            }
            for (k, v) in extra {
                builder = builder.env(k, v);
            }
            Ok(builder.start().map_or_else(|e| Look::NotYet(format!("{e:#}")), Look::Done))
        });
        self.replicas[i] = Some(gateway);
        Ok(())
    }

    /// Environment shared by the replicas (for starting more like them).
    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Arguments shared by the replicas.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// Starts one more replica like the others (with `extra` environment on top), sharing
    /// Redis and the keys but not behind nginx; returns its index.
    pub fn add_replica(&mut self, extra: &[(&str, &str)]) -> anyhow::Result<usize> {
        let mut builder = Gateway::builder().args(&self.args.iter().map(String::as_str).collect::<Vec<_>>());
        for (k, v) in &self.env {
            builder = builder.env(k, v);
        }
        for (k, v) in extra {
            builder = builder.env(k, v);
        }
        let gateway = builder.start().context("starting an added replica")?;
        self.addrs.push(gateway.addr().to_owned());
        self.replicas.push(Some(gateway));
        Ok(self.replicas.len() - 1)
    }

    /// nginx's error log.
    pub fn nginx_log(&self) -> String {
        self.nginx.log()
    }
}
