//! The Redis store: task records in hashes, jobs in per-shard streams consumed by one
//! consumer group, events on per-task channels. Every transition is one Lua script
//! (`lua/*.lua`) run with `EVALSHA`: one round trip, atomic, timed by Redis's own clock (so
//! replicas with skewed clocks agree on leases and lifetimes).
//!
//! Invariants: every Redis call is bounded by the command timeout (connect and response); a
//! connection that fails at the connection level is replaced (see `pool`); the job
//! reader and the event subscriber have their own connections and reconnect on their own,
//! and so do the writes that wait for replicas (`WAIT` blocks its connection; see `acked`).
//! With Sentinel every single-server connection goes to the primary the sentinels name and
//! follows a failover (see `sentinel`). Against a Redis Cluster every command touches one
//! slot (see `conn`).

mod acked;
mod admin;
mod at_rest;
mod cluster_reader;
mod conn;
mod create;
mod events;
mod heartbeat;
mod job_queue;
mod keys;
mod lists;
mod once;
mod pins;
mod pool;
mod quota;
mod rate;
mod record;
mod scripts;
mod seal_ring;
mod sentinel;
mod subscriber;
mod task_store;
mod terminal_cache;
mod tls;
mod vault;

use std::sync::Arc;
use std::time::Duration;

use redis::Value;
use redis::cluster_async::ClusterConnection;
use tokio::sync::Mutex;

use mcpgate_protocol::Era;

use crate::clock::millis;
use crate::error::StoreError;
use crate::events::Hub;
use crate::metrics::{CallOutcome, StoreMetrics};
use cluster_reader::ClusterReader;
use conn::Conn;
use keys::{GROUP, Keys};
use pool::{Connections, is_connection_failure};
pub use sentinel::SentinelOptions;
use sentinel::{NodeSource, Resolver};
use subscriber::Subscriber;
use terminal_cache::TerminalCache;
pub use terminal_cache::{TerminalCacheLimits, TerminalCacheStats};
use tls::Trust;

/// How to reach and lay out the Redis store.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://`, `rediss://` or `redis+unix://` URL; in cluster mode, one or more seed
    /// nodes, comma-separated. Ignored (may be empty) with `sentinel`.
    pub url: String,
    /// Find the primary through Redis Sentinel (and follow its failovers) instead of `url`.
    pub sentinel: Option<SentinelOptions>,
    /// A Redis Cluster (not one server).
    pub cluster: bool,
    /// Prefix of every key (several deployments may share one Redis).
    pub prefix: String,
    /// Number of shards (1–256); must be the same on every replica.
    pub shards: u16,
    /// Connections to a single server, each shared by concurrent calls (multiplexed).
    pub pool_size: usize,
    /// Bound on every call: connect and response.
    pub command_timeout: Duration,
    /// Seals task payloads (arguments, answers, state, results) when writing, if it says so,
    /// and opens sealed ones when reading; `None` stores and reads them as they are.
    pub at_rest: Option<Arc<mcpgate_seal::AtRest>>,
    /// With sealing on: how long after the first replica started with it tasks may still be
    /// created holding plain values (or values sealed the older way), so replicas that do not
    /// seal yet can run alongside during a rolling change; records created later are refused
    /// such values. The first replica to start records the moment; later ones read it.
    pub at_rest_window: Duration,
    /// Replicas that must hold each write a client or a worker relies on (a task's creation,
    /// claim, input request, answer, settle, cancel; a vault entry's write and deletes; a
    /// single-use mark) before it is answered: `WAIT` on the connection that wrote, pipelined
    /// with the write. 0 = answer once the primary has it.
    pub replicas_ack: u32,
    /// How long `WAIT` waits for those replicas (below the command timeout, so the call gets
    /// its answer rather than time out).
    pub replicas_ack_timeout: Duration,
    /// The CA bundle (PEM) that TLS connections to Redis (`rediss://`, cluster seeds,
    /// Sentinel with `tls`) verify the servers' certificates against, instead of the system
    /// roots; `None` = the system roots.
    pub tls_ca_pem: Option<Vec<u8>>,
}

/// The Redis implementation of the store contracts.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

/// Where calls go: one server through a pool, or a cluster.
enum Backend {
    /// One Redis server.
    Single {
        /// Where the reader's own connection goes (the pool's and the subscriber's too).
        source: Arc<NodeSource>,
        pool: Arc<Connections>,
        /// The waited writes' own connections (with `replicas_ack` > 0; same source, same
        /// size): Redis reads nothing more from a connection blocked in `WAIT`, so a waited
        /// write on a shared connection would stall every call queued behind it.
        acked: Option<Arc<Connections>>,
    },
    /// A Redis Cluster.
    Cluster {
        /// Seed node URLs (for the readers' own connections).
        urls: Vec<String>,
        /// What the readers' own connections trust (as the routing connection's).
        trust: Trust,
        /// Routes every command to its slot's node; clones share it.
        conn: ClusterConnection,
        /// The waited writes' own routing connection (with `replicas_ack` > 0): one
        /// connection per node, so a `WAIT` would block every call routed to its node.
        acked: Option<ClusterConnection>,
    },
}

struct Inner {
    backend: Backend,
    /// The cluster job readers (started on the first read).
    cluster_reader: tokio::sync::OnceCell<ClusterReader>,
    keys: Keys,
    /// Sealing of payload fields at rest.
    payloads: at_rest::Payloads,
    shards: u16,
    timeout: Duration,
    /// Replicas each relied-on write waits for, and for how long (`None`: 0 replicas; no
    /// `WAIT` is sent at all).
    ack: Option<(u32, Duration)>,
    reader: Mutex<Option<redis::aio::MultiplexedConnection>>,
    /// Redis's client id of the reader's connection (0 = none yet).
    reader_client: std::sync::atomic::AtomicI64,
    /// The node source's epoch the reader's connection was made from.
    reader_epoch: std::sync::atomic::AtomicU64,
    metrics: StoreMetrics,
    /// Where the next reclaim scan resumes: the shard, and the `XAUTOCLAIM` cursor of each.
    reclaim: std::sync::Mutex<ReclaimCursor>,
    subscriber: Arc<Subscriber>,
    /// Finished records read here, answered again without a round trip (see
    /// `terminal_cache`); the subscriber drops what is purged anywhere.
    terminal: Arc<TerminalCache>,
}

/// Progress of the reclaim scan over the shards' pending entries.
struct ReclaimCursor {
    shard: u16,
    starts: Vec<String>,
}

impl std::fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisStore").field("shards", &self.inner.shards).finish_non_exhaustive()
    }
}

impl RedisStore {
    /// Connects, creates the consumer groups and loads the scripts.
    pub async fn connect(options: RedisOptions) -> Result<Self, StoreError> {
        if !(1..=256).contains(&options.shards) {
            return Err(StoreError::config("shards must be between 1 and 256"));
        }
        let invalid = |e: redis::RedisError| StoreError::config_caused("invalid Redis URL", e);
        let trust = Trust::new(options.tls_ca_pem.clone())?;
        let (backend, sources) = if let Some(sentinel) = &options.sentinel {
            if options.cluster {
                return Err(StoreError::config("a Sentinel set is one primary, not a cluster (store.cluster)"));
            }
            let source =
                Arc::new(NodeSource::Sentinel(Box::new(Resolver::new(sentinel, &trust, options.command_timeout)?)));
            let pool = Arc::new(Connections::new(source.clone(), options.pool_size, options.command_timeout));
            let acked = acked_pool(&options, &source);
            (Backend::Single { source: source.clone(), pool, acked }, vec![source])
        } else {
            let urls: Vec<String> =
                options.url.split(',').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect();
            // Pub/sub reaches every node of a cluster, so the subscriber may use any seed.
            let sources = urls
                .iter()
                .map(|u| trust.client(u).map(|c| Arc::new(NodeSource::Fixed(Box::new(c)))))
                .collect::<Result<Vec<_>, _>>()?;
            let first = sources.first().cloned().ok_or_else(|| StoreError::config("no Redis URL"))?;
            let backend = if options.cluster {
                let client = trust
                    .cluster(urls.clone())?
                    .connection_timeout(options.command_timeout)
                    .response_timeout(options.command_timeout)
                    .build()
                    .map_err(invalid)?;
                let conn = tokio::time::timeout(options.command_timeout * 3, client.get_async_connection())
                    .await
                    .map_err(|_| StoreError::Timeout { millis: millis(options.command_timeout * 3) })??;
                let acked = if options.replicas_ack > 0 {
                    Some(
                        tokio::time::timeout(options.command_timeout * 3, client.get_async_connection())
                            .await
                            .map_err(|_| StoreError::Timeout { millis: millis(options.command_timeout * 3) })??,
                    )
                } else {
                    None
                };
                Backend::Cluster { urls, conn, trust, acked }
            } else {
                if sources.len() > 1 {
                    return Err(StoreError::config(
                        "several Redis URLs are only meaningful for a cluster (store.cluster)",
                    ));
                }
                let pool = Arc::new(Connections::new(first.clone(), options.pool_size, options.command_timeout));
                let acked = acked_pool(&options, &first);
                Backend::Single { source: first, pool, acked }
            };
            (backend, sources)
        };
        let keys = Keys::new(&options.prefix);
        let hub = Hub::new();
        let terminal = Arc::new(TerminalCache::default());
        let subscriber = Subscriber::start(sources, keys.clone(), hub, terminal.clone(), options.command_timeout);
        let store = Self {
            inner: Arc::new(Inner {
                backend,
                cluster_reader: tokio::sync::OnceCell::new(),
                keys,
                payloads: at_rest::Payloads::new(options.at_rest.clone()),
                shards: options.shards,
                timeout: options.command_timeout,
                ack: (options.replicas_ack > 0).then_some((options.replicas_ack, options.replicas_ack_timeout)),
                reader: Mutex::new(None),
                reader_client: std::sync::atomic::AtomicI64::new(0),
                reader_epoch: std::sync::atomic::AtomicU64::new(0),
                metrics: StoreMetrics::default(),
                reclaim: std::sync::Mutex::new(ReclaimCursor {
                    shard: 0,
                    starts: vec!["0-0".to_owned(); usize::from(options.shards)],
                }),
                subscriber,
                terminal,
            }),
        };
        store.prepare().await?;
        store.settle_cutover(options.at_rest_window).await?;
        Ok(store)
    }

    /// Creates missing consumer groups and loads the scripts (idempotent; also run after
    /// Redis lost its data).
    async fn prepare(&self) -> Result<(), StoreError> {
        let groups: Vec<redis::Cmd> = (0..self.inner.shards)
            .map(|shard| {
                let shard = u8::try_from(shard).unwrap_or(u8::MAX);
                let mut cmd = redis::cmd("XGROUP");
                cmd.arg("CREATE").arg(self.inner.keys.jobs(shard)).arg(GROUP).arg("0").arg("MKSTREAM");
                cmd
            })
            .collect();
        self.call(Retry::Yes, groups.as_slice(), |conn, groups| {
            Box::pin(async move {
                // One command at a time: a pipeline folds every BUSYGROUP (the group exists,
                // the expected answer after the first replica) into one aggregate error.
                for cmd in groups {
                    match cmd.query_async::<()>(&mut *conn).await {
                        Err(e) if e.code() != Some("BUSYGROUP") => return Err(e),
                        _ => {}
                    }
                }
                for script in scripts::all() {
                    script.load_async(&mut *conn).await?;
                }
                Ok(())
            })
        })
        .await
    }

    /// Checks that Redis answers (for readiness).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let ping = redis::cmd("PING");
        self.call(Retry::Yes, &ping, |conn, ping| {
            Box::pin(async move { ping.query_async::<String>(conn).await.map(drop) })
        })
        .await
    }

    /// Runs `f` on a connection, everything bounded by the command timeout. After a
    /// connection-level failure the pool is retired and, for operations that may safely run
    /// twice, `f` runs once more on a fresh connection (a cluster connection reconnects
    /// itself). A timeout (Redis's reply late, whether redis-rs or the outer bound noticed)
    /// is reported as one and counted towards replacing the connections (see `pool`).
    async fn call<D: Sync + ?Sized, T>(
        &self,
        retry: Retry,
        data: &D,
        f: impl for<'c> Fn(&'c mut Conn, &'c D) -> Op<'c, T>,
    ) -> Result<T, StoreError> {
        self.call_on(Lane::Shared, retry, data, f).await
    }

    /// [`Self::call`] on the connections of `lane` (the shared ones when the waited writes
    /// have none of their own: `replicas_ack` = 0).
    async fn call_on<D: Sync + ?Sized, T>(
        &self,
        lane: Lane,
        retry: Retry,
        data: &D,
        f: impl for<'c> Fn(&'c mut Conn, &'c D) -> Op<'c, T>,
    ) -> Result<T, StoreError> {
        let inner = &self.inner;
        let route = match (&inner.backend, lane) {
            (Backend::Single { acked: Some(acked), .. }, Lane::Acked) => Route::Pool(acked),
            (Backend::Single { pool, .. }, _) => Route::Pool(pool),
            (Backend::Cluster { acked: Some(acked), .. }, Lane::Acked) => Route::Cluster(acked),
            (Backend::Cluster { conn, .. }, _) => Route::Cluster(conn),
        };
        let pool = match route {
            Route::Pool(pool) => Some(pool),
            Route::Cluster(_) => None,
        };
        // The connection in use, so a timeout can be charged to it.
        let used: std::sync::Mutex<Option<(u64, redis::aio::MultiplexedConnection)>> = std::sync::Mutex::new(None);
        let work = async {
            let mut attempt = 0;
            loop {
                let (generation, mut conn) = match route {
                    Route::Pool(pool) => {
                        let pooled = pool.get().await?;
                        *used.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                            Some((pooled.generation, pooled.conn.clone()));
                        (Some(pooled.generation), Conn::Single(pooled.conn))
                    }
                    Route::Cluster(conn) => (None, Conn::Cluster(conn.clone())),
                };
                match f(&mut conn, data).await {
                    Ok(v) => return Ok(v),
                    Err(e) if e.is_timeout() => return Err(StoreError::Timeout { millis: millis(inner.timeout) }),
                    Err(e) if is_connection_failure(&e) => {
                        if let (Some(generation), Some(pool)) = (generation, pool) {
                            pool.retire(generation);
                        }
                        attempt += 1;
                        if retry == Retry::No || attempt > 1 {
                            return Err(e.into());
                        }
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        };
        let started = tokio::time::Instant::now();
        let result = match tokio::time::timeout(inner.timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(StoreError::Timeout { millis: millis(inner.timeout) }),
        };
        let outcome = match &result {
            Ok(_) => CallOutcome::Ok,
            Err(StoreError::Timeout { .. }) => CallOutcome::Timeout,
            Err(_) => CallOutcome::Error,
        };
        if let Some(pool) = pool {
            match outcome {
                CallOutcome::Timeout => {
                    let used = used.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                    if let Some((generation, conn)) = used {
                        pool.timed_out(generation, Some(conn));
                    }
                }
                _ => pool.answered(),
            }
        }
        inner.metrics.record(started.elapsed(), outcome);
        result
    }

    /// Sends several single-slot commands together (one call; a multiplexed connection
    /// pipelines them, a cluster connection sends each to its node) and returns their replies
    /// in order.
    async fn call_each<T: redis::FromRedisValue + Send>(
        &self,
        retry: Retry,
        cmds: Vec<redis::Cmd>,
    ) -> Result<Vec<T>, StoreError> {
        if cmds.is_empty() {
            return Ok(Vec::new());
        }
        self.call(retry, cmds.as_slice(), |conn, cmds| {
            Box::pin(futures_util::future::try_join_all(cmds.iter().map(|cmd| {
                let mut conn = conn.clone();
                async move { cmd.query_async::<T>(&mut conn).await }
            })))
        })
        .await
    }

    /// Bounds this replica's cache of finished task records (on by default, with
    /// [`TerminalCacheLimits::default`]; `entries: 0` turns it off).
    pub fn set_terminal_cache(&self, limits: TerminalCacheLimits) {
        self.inner.terminal.set_limits(limits);
    }

    /// What this replica's cache of finished task records holds now.
    pub fn terminal_cache(&self) -> TerminalCacheStats {
        self.inner.terminal.stats()
    }

    /// Call latency and failures.
    pub fn metrics(&self) -> &StoreMetrics {
        &self.inner.metrics
    }

    /// Jobs waiting in the queue or held by a worker, and tasks running where they were
    /// created, over every shard (two commands per shard, sent together).
    pub async fn queue_depth(&self) -> Result<u64, StoreError> {
        let lengths: Vec<u64> = self
            .call_each(
                Retry::Yes,
                (0..self.inner.shards)
                    .flat_map(|shard| {
                        let shard = u8::try_from(shard).unwrap_or(u8::MAX);
                        let mut stream = redis::cmd("XLEN");
                        stream.arg(self.inner.keys.jobs(shard));
                        let mut leases = redis::cmd("ZCARD");
                        leases.arg(self.inner.keys.leases(shard));
                        [stream, leases]
                    })
                    .collect(),
            )
            .await?;
        Ok(lengths.iter().sum())
    }

    /// Invokes a script on a pooled connection.
    async fn script(
        &self,
        retry: Retry,
        script: &'static redis::Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Value, StoreError> {
        let mut invocation = script.prepare_invoke();
        for k in &keys {
            invocation.key(k);
        }
        for a in &args {
            invocation.arg(a);
        }
        self.call(retry, &invocation, |conn, invocation| Box::pin(invocation.invoke_async::<Value>(conn))).await
    }

    /// A shard for a task no retry has to find again.
    fn random_shard(&self) -> u8 {
        use rand::RngExt as _;
        u8::try_from(rand::rng().random_range(0..self.inner.shards)).unwrap_or(0)
    }

    fn shard_of(&self, digest: &[u8; 32]) -> u8 {
        u8::try_from(u16::from(digest[0]) % self.inner.shards).unwrap_or(0)
    }
}

/// One Redis operation on a borrowed connection.
type Op<'c, T> = std::pin::Pin<Box<dyn Future<Output = redis::RedisResult<T>> + Send + 'c>>;

/// Which connections a call runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// The connections every call shares.
    Shared,
    /// The waited writes' own (a `WAIT` blocks its connection until it returns).
    Acked,
}

/// The connections one call draws from.
#[derive(Clone, Copy)]
enum Route<'a> {
    /// A pool of connections to one server.
    Pool(&'a Arc<Connections>),
    /// A cluster's routing connection.
    Cluster(&'a ClusterConnection),
}

/// The waited writes' own pool, with `replicas_ack` > 0: the same node source (so it follows
/// a Sentinel failover as the shared pool does) and the same size.
fn acked_pool(options: &RedisOptions, source: &Arc<NodeSource>) -> Option<Arc<Connections>> {
    (options.replicas_ack > 0)
        .then(|| Arc::new(Connections::new(source.clone(), options.pool_size, options.command_timeout)))
}

/// Whether an operation may run twice when its first try met a dead connection (it may have
/// executed before the connection broke).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Reads, and writes whose repetition changes nothing (create is idempotent by digest).
    Yes,
    /// Writes whose repetition would be observable (claims, cancel, settle).
    No,
}

fn reply(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(StoreError::corrupt(format!("unexpected script reply {other:?}"))),
    }
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    }
}
