//! A whole deployment on loopback: one `redis-server`, N `mcpgate` replicas sharing it (and
//! one set of sealing keys), and `nginx` round-robin in front. Everything is killed when the
//! cluster drops; on a failing test every replica's log is printed.

use std::collections::HashMap;

use anyhow::Context;
use mcpgate_store::testing::RedisServer;

use crate::gateway::Gateway;
use crate::nginx::Nginx;

/// Sealing keys every replica of a test cluster shares.
pub const CLUSTER_SEAL_KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

/// Redis + replicas + nginx.
#[derive(Debug)]
pub struct Cluster {
    /// The replicas (`None` once killed).
    pub replicas: Vec<Option<Gateway>>,
    /// The shared Redis.
    pub redis: RedisServer,
    nginx: Nginx,
    env: Vec<(String, String)>,
    args: Vec<String>,
}

/// Builds a cluster.
#[derive(Debug, Default)]
pub struct ClusterBuilder {
    replicas: usize,
    env: HashMap<String, String>,
    per_replica: HashMap<usize, Vec<(String, String)>>,
    args: Vec<String>,
}

impl ClusterBuilder {
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
        let redis = RedisServer::start();
        let mut env: Vec<(String, String)> = vec![
            ("MCPGATE_REDIS_URL".to_owned(), redis.url()),
            ("MCPGATE_SEAL_KEYS".to_owned(), CLUSTER_SEAL_KEYS.to_owned()),
            ("MCPGATE_LOG_LEVEL".to_owned(), "info".to_owned()),
        ];
        env.extend(self.env);
        let mut replicas = Vec::with_capacity(self.replicas);
        for i in 0..self.replicas {
            let mut builder = Gateway::builder().args(&self.args.iter().map(String::as_str).collect::<Vec<_>>());
            for (k, v) in env.iter().chain(self.per_replica.get(&i).into_iter().flatten()) {
                builder = builder.env(k, v);
            }
            replicas.push(Some(builder.start().with_context(|| format!("starting replica {i}"))?));
        }
        let upstreams: Vec<String> = replicas.iter().flatten().map(|g| g.addr().to_owned()).collect();
        let nginx = Nginx::start(&upstreams)?;
        Ok(Cluster { replicas, redis, nginx, env, args: self.args })
    }
}

impl Cluster {
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
        self.replicas.push(Some(builder.start().context("starting an added replica")?));
        Ok(self.replicas.len() - 1)
    }

    /// nginx's error log.
    pub fn nginx_log(&self) -> String {
        self.nginx.log()
    }
}
