//! The section of the Redis task store (`[store]`, `[store.sentinel]`): keys, shards, pool,
//! timeouts, TLS, replication acknowledgement and the replica's cache of finished tasks.
//! Each default is declared once, in its `Default` impl.

use serde::{Deserialize, Serialize};

use super::secret::Secret;

/// `[store]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// Prefix of every Redis key.
    pub prefix: String,
    /// Shards (job streams); the same on every replica.
    pub shards: u64,
    /// Redis connections, each shared by all concurrent calls (multiplexed).
    pub pool_size: u64,
    /// Bound on every Redis call.
    pub command_timeout_ms: u64,
    /// `redis_url` names a Redis Cluster (one or more seed nodes, comma-separated).
    pub cluster: bool,
    /// Task arguments, answers, state and results are sealed in Redis with the seal keys.
    pub encrypt_at_rest: bool,
    /// With `encrypt_at_rest`: for how long after the first replica started with it tasks
    /// may still be created holding plain (or older-format) payloads; later ones are refused
    /// them.
    pub at_rest_window_secs: u64,
    /// Redis replicas that must hold each write a client or a worker relies on (task writes,
    /// vault writes and deletes, single-use marks) before it is answered (`WAIT`); 0 = answer
    /// once the primary has it (a failover may lose it).
    pub replicas_ack: u64,
    /// How long a write waits for those replicas; below `command_timeout_ms`.
    pub replicas_ack_timeout_ms: u64,
    /// `[store.sentinel]`: find the Redis primary through Sentinel (instead of `redis_url`).
    pub sentinel: Option<SentinelConfig>,
    /// A PEM bundle of the CAs that TLS connections to Redis trust instead of the system
    /// roots (a private CA); `None` = the system roots.
    pub tls_ca_file: Option<String>,
    /// Finished task records each replica keeps to answer `tasks/get` without a round trip
    /// (0 = none); dropped when purged on any replica or expired.
    pub terminal_cache_entries: u64,
    /// Bytes those records may take.
    pub terminal_cache_bytes: u64,
    /// A finished record larger than this (e.g. a big result) is not kept.
    pub terminal_cache_record_bytes: u64,
}

/// `[store.sentinel]`: the Sentinel set that names the Redis primary.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SentinelConfig {
    /// The name the sentinels monitor the primary under (required).
    pub master_name: String,
    /// The sentinels, `host:port` each (at least one).
    pub addresses: Vec<String>,
    /// TLS to the sentinels and the data nodes.
    pub tls: bool,
    /// The data nodes' ACL user.
    pub username: Option<String>,
    /// The data nodes' password.
    pub password: Option<Secret>,
    /// The sentinels' ACL user.
    pub sentinel_username: Option<String>,
    /// The sentinels' password.
    pub sentinel_password: Option<Secret>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            prefix: "mcpgate".to_owned(),
            shards: 16,
            pool_size: 2,
            command_timeout_ms: 2_000,
            cluster: false,
            encrypt_at_rest: true,
            at_rest_window_secs: 900,
            replicas_ack: 0,
            replicas_ack_timeout_ms: 1_000,
            sentinel: None,
            tls_ca_file: None,
            terminal_cache_entries: 10_000,
            terminal_cache_bytes: 64 << 20,
            terminal_cache_record_bytes: 64 << 10,
        }
    }
}
