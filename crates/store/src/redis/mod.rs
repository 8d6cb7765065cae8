//! The Redis store: task records in hashes, jobs in per-shard streams consumed by one
//! consumer group, events on per-task channels. Every transition is one Lua script
//! (`lua/*.lua`) run with `EVALSHA`: one round trip, atomic, timed by Redis's own clock (so
//! replicas with skewed clocks agree on leases and lifetimes).
//!
//! Invariants: every Redis call is bounded by the command timeout (pool wait, connect and
//! response); a connection that fails at the connection level leaves the pool; the job
//! reader and the event subscriber have their own connections and reconnect on their own.

mod keys;
mod pool;
mod record;
mod scripts;
mod subscriber;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::{AsyncCommands as _, AsyncConnectionConfig, Client, Value};
use tokio::sync::Mutex;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;

use crate::contract::{EventBus, JobQueue, OnceMarks, TaskStore};
use crate::error::StoreError;
use crate::events::{Hub, Subscription};
use crate::metrics::{CallOutcome, StoreMetrics};
use crate::model::{
    Answered, Cancelled, Claim, Created, Job, Lease, ListCursor, NewTask, Page, RawByKey, Renewal, Settled, Skip,
    TaskEvent, TaskId, TaskOutcome, TaskRecord,
};
use keys::{GROUP, Keys};
use pool::{Connections, is_connection_failure};
use record::{decode, item, parse_status};
use subscriber::Subscriber;

/// How to reach and lay out the Redis store.
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// `redis://`, `rediss://` or `redis+unix://` URL.
    pub url: String,
    /// Prefix of every key (several deployments may share one Redis).
    pub prefix: String,
    /// Number of shards (1–256); must be the same on every replica.
    pub shards: u16,
    /// Pooled (multiplexed) connections.
    pub pool_size: usize,
    /// Bound on every call: pool wait, connect and response.
    pub command_timeout: Duration,
}

/// The Redis implementation of the store contracts.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

struct Inner {
    client: Client,
    pool: Connections,
    keys: Keys,
    shards: u16,
    timeout: Duration,
    reader: Mutex<Option<redis::aio::MultiplexedConnection>>,
    metrics: StoreMetrics,
    /// Where the next reclaim scan resumes: the shard, and the `XAUTOCLAIM` cursor of each.
    reclaim: std::sync::Mutex<ReclaimCursor>,
    subscriber: Arc<Subscriber>,
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
            return Err(StoreError::Config { detail: "shards must be between 1 and 256".to_owned() });
        }
        let client = Client::open(options.url.as_str())
            .map_err(|e| StoreError::Config { detail: format!("invalid Redis URL: {e}") })?;
        let pool = Connections::new(client.clone(), options.pool_size.max(1), options.command_timeout)?;
        let keys = Keys::new(&options.prefix);
        let hub = Hub::new();
        let subscriber = Subscriber::start(client.clone(), keys.clone(), hub, options.command_timeout);
        let store = Self {
            inner: Arc::new(Inner {
                client,
                pool,
                keys,
                shards: options.shards,
                timeout: options.command_timeout,
                reader: Mutex::new(None),
                metrics: StoreMetrics::default(),
                reclaim: std::sync::Mutex::new(ReclaimCursor {
                    shard: 0,
                    starts: vec!["0-0".to_owned(); usize::from(options.shards)],
                }),
                subscriber,
            }),
        };
        store.prepare().await?;
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

    /// Runs `f` on a pooled connection, everything bounded by the command timeout. After a
    /// connection-level failure the pool is retired and, for operations that may safely run
    /// twice, `f` runs once more on a fresh connection.
    async fn call<D: Sync + ?Sized, T>(
        &self,
        retry: Retry,
        data: &D,
        f: impl for<'c> Fn(&'c mut redis::aio::MultiplexedConnection, &'c D) -> Op<'c, T>,
    ) -> Result<T, StoreError> {
        let inner = &self.inner;
        let work = async {
            let mut attempt = 0;
            loop {
                let mut conn = inner.pool.get().await?;
                match f(&mut conn.conn, data).await {
                    Ok(v) => return Ok(v),
                    Err(e) if is_connection_failure(&e) => {
                        inner.pool.retire(conn);
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
        let result = tokio::time::timeout(inner.timeout, work).await;
        let outcome = match &result {
            Ok(Ok(_)) => CallOutcome::Ok,
            Ok(Err(_)) => CallOutcome::Error,
            Err(_) => CallOutcome::Timeout,
        };
        inner.metrics.record(started.elapsed(), outcome);
        result.map_err(|_| StoreError::Timeout { millis: millis(inner.timeout) })?
    }

    /// Call latency and failures.
    pub fn metrics(&self) -> &StoreMetrics {
        &self.inner.metrics
    }

    /// Jobs waiting in the queue or held by a worker, over every shard (one round trip).
    pub async fn queue_depth(&self) -> Result<u64, StoreError> {
        let mut pipe = redis::pipe();
        for shard in 0..self.inner.shards {
            pipe.cmd("XLEN").arg(self.inner.keys.jobs(u8::try_from(shard).unwrap_or(u8::MAX)));
        }
        let lengths: Vec<u64> = self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
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

    fn shard_of(&self, digest: &[u8; 32]) -> u8 {
        u8::try_from(u16::from(digest[0]) % self.inner.shards).unwrap_or(0)
    }
}

/// One Redis operation on a borrowed connection.
type Op<'c, T> = std::pin::Pin<Box<dyn Future<Output = redis::RedisResult<T>> + Send + 'c>>;

/// Whether an operation may run twice when its first try met a dead connection (it may have
/// executed before the connection broke).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Retry {
    /// Reads, and writes whose repetition changes nothing (create is idempotent by digest).
    Yes,
    /// Writes whose repetition would be observable (claims, cancel, settle).
    No,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn reply(v: Value) -> Result<Vec<Value>, StoreError> {
    match v {
        Value::Array(items) => Ok(items),
        other => Err(StoreError::Corrupt { detail: format!("unexpected script reply {other:?}") }),
    }
}

fn era_name(era: Era) -> &'static str {
    match era {
        Era::Legacy => "legacy",
        Era::Modern => "modern",
    }
}

impl TaskStore for RedisStore {
    async fn create(&self, task: NewTask) -> Result<Created, StoreError> {
        let shard = self.shard_of(&task.idempotency);
        let keys = &self.inner.keys;
        let mut force = false;
        loop {
            let id = TaskId::generate(shard);
            let ttl = task.ttl_ms.map_or_else(|| "-1".to_owned(), |t| t.to_string());
            let out = reply(
                self.script(
                    Retry::Yes,
                    &scripts::CREATE,
                    vec![
                        keys.task(&id),
                        keys.owner(shard, &task.owner),
                        keys.jobs(shard),
                        keys.idempotency(shard, &task.idempotency),
                    ],
                    [
                        id.to_string(),
                        task.owner.clone(),
                        task.issuer.clone(),
                        task.subject.clone(),
                        era_name(task.era).to_owned(),
                        task.tool.clone(),
                        task.arguments.clone(),
                        task.capabilities.clone(),
                        ttl,
                        task.poll_interval_ms.to_string(),
                        task.idempotency_window_ms.to_string(),
                        if force { "1" } else { "0" }.to_owned(),
                        task.index_horizon_ms.unwrap_or(0).to_string(),
                        task.state.clone().unwrap_or_default(),
                    ]
                    .into_iter()
                    .chain(task.input_responses.iter().flat_map(|(k, a)| [k.clone(), a.method.clone(), a.json.clone()]))
                    .collect(),
                )
                .await?,
            )?;
            match (item(&out, 0).as_deref(), item(&out, 1)) {
                (Some("1"), Some(created)) => {
                    let created_ms = created.parse().unwrap_or(0);
                    return Ok(Created::New(TaskRecord {
                        id,
                        owner: task.owner,
                        issuer: task.issuer,
                        subject: task.subject,
                        era: task.era,
                        tool: task.tool,
                        arguments: task.arguments,
                        capabilities: task.capabilities,
                        status: TaskStatus::Working,
                        status_message: None,
                        created_ms,
                        updated_ms: created_ms,
                        ttl_ms: task.ttl_ms,
                        poll_interval_ms: task.poll_interval_ms,
                        outcome: None,
                        attempts: 0,
                        input_requests: RawByKey::new(),
                        state: task.state,
                        input_responses: task.input_responses,
                    }));
                }
                (Some("0"), Some(existing)) => {
                    let existing = TaskId::parse(&existing)
                        .ok_or_else(|| StoreError::Corrupt { detail: "idempotency key holds no task id".to_owned() })?;
                    match self.get(&existing).await? {
                        Some(record) => return Ok(Created::Existing(record)),
                        // Expired at the edge of the window: create anew.
                        None => force = true,
                    }
                }
                _ => return Err(StoreError::Corrupt { detail: "unexpected create reply".to_owned() }),
            }
        }
    }

    async fn get(&self, id: &TaskId) -> Result<Option<TaskRecord>, StoreError> {
        let key = self.inner.keys.task(id);
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&key);
        let pairs: Vec<Value> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        decode(&pairs)
    }

    async fn list(&self, owner: &str, cursor: Option<&ListCursor>, limit: usize) -> Result<Page, StoreError> {
        let keys: Vec<String> =
            (0..self.inner.shards).map(|s| self.inner.keys.owner(u8::try_from(s).unwrap_or(0), owner)).collect();
        let start = cursor.map_or_else(|| "-".to_owned(), |c| format!("({}", c.0));
        let fetch = limit.saturating_add(1);
        let mut pipe = redis::pipe();
        for key in &keys {
            pipe.cmd("ZRANGE").arg(key).arg(&start).arg("+").arg("BYLEX").arg("LIMIT").arg(0).arg(fetch);
        }
        let members: Vec<Vec<String>> =
            self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
        let mut all: Vec<String> = members.into_iter().flatten().collect();
        all.sort();
        let more = all.len() > limit;
        all.truncate(limit);
        let entries: Vec<(&String, TaskId)> = all
            .iter()
            .filter_map(|m| m.split_once(':').and_then(|(_, id)| TaskId::parse(id)).map(|id| (m, id)))
            .collect();
        let task_keys: Vec<String> = entries.iter().map(|(_, id)| self.inner.keys.task(id)).collect();
        let records: Vec<Vec<Value>> = if task_keys.is_empty() {
            Vec::new()
        } else {
            let mut pipe = redis::pipe();
            for key in &task_keys {
                pipe.cmd("HGETALL").arg(key);
            }
            self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?
        };
        let mut tasks = Vec::with_capacity(records.len());
        let mut dead = redis::pipe();
        let mut any_dead = false;
        for (pairs, (member, id)) in records.iter().zip(&entries) {
            match decode(pairs)? {
                Some(record) => tasks.push(record),
                // The task expired: drop its index entry now (one extra round trip, only then).
                None => {
                    dead.cmd("ZREM").arg(self.inner.keys.owner(id.shard(), owner)).arg(member.as_str()).ignore();
                    any_dead = true;
                }
            }
        }
        if any_dead {
            self.call(Retry::Yes, &dead, |conn, pipe| Box::pin(pipe.query_async::<()>(conn))).await?;
        }
        let next = if more { all.last().map(|m| ListCursor(m.clone())) } else { None };
        Ok(Page { tasks, next })
    }

    async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        let keys = &self.inner.keys;
        let out = reply(
            self.script(Retry::No, &scripts::CANCEL, vec![keys.task(id)], vec![owner.to_owned(), keys.channel(id)])
                .await?,
        )?;
        match item(&out, 0).as_deref() {
            Some("notfound") => Ok(Cancelled::NotFound),
            Some("terminal") => {
                decode(&out[1..])?.map_or(Ok(Cancelled::NotFound), |r| Ok(Cancelled::AlreadyTerminal(r)))
            }
            Some("ok") => decode(&out[1..])?.map_or(Ok(Cancelled::NotFound), |r| Ok(Cancelled::Now(r))),
            _ => Err(StoreError::Corrupt { detail: "unexpected cancel reply".to_owned() }),
        }
    }

    async fn claim(&self, job: &Job, worker: &str, lease: Duration, max_attempts: u32) -> Result<Claim, StoreError> {
        let keys = &self.inner.keys;
        let shard = job.task.shard();
        let out = reply(
            self.script(
                Retry::No,
                &scripts::CLAIM,
                vec![keys.task(&job.task), keys.jobs(shard), keys.dead(shard)],
                vec![
                    job.entry.clone(),
                    millis(lease).to_string(),
                    max_attempts.to_string(),
                    worker.to_owned(),
                    keys.channel(&job.task),
                ],
            )
            .await?,
        )?;
        Ok(match item(&out, 0).as_deref() {
            Some("run") => {
                let token = item(&out, 1)
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| StoreError::Corrupt { detail: "claim reply without a token".to_owned() })?;
                let record = decode(&out[2..])?
                    .ok_or_else(|| StoreError::Corrupt { detail: "claim reply without a record".to_owned() })?;
                let lease =
                    Lease { task: job.task.clone(), token, entry: job.entry.clone(), worker: worker.to_owned() };
                Claim::Run { lease, task: Box::new(record) }
            }
            Some("gone") => Claim::Skip(Skip::Gone),
            Some("terminal") => Claim::Skip(Skip::Terminal),
            Some("parked") => Claim::Skip(Skip::Parked),
            Some("busy") => Claim::Skip(Skip::Busy),
            Some("exhausted") => Claim::Exhausted { tool: item(&out, 1).unwrap_or_default() },
            _ => return Err(StoreError::Corrupt { detail: "unexpected claim reply".to_owned() }),
        })
    }

    async fn renew(&self, lease: &Lease, duration: Duration, message: Option<&str>) -> Result<Renewal, StoreError> {
        let out = self
            .script(
                Retry::No,
                &scripts::RENEW,
                vec![self.inner.keys.task(&lease.task), self.inner.keys.jobs(lease.task.shard())],
                vec![
                    lease.token.to_string(),
                    millis(duration).to_string(),
                    if message.is_some() { "1" } else { "0" }.to_owned(),
                    message.unwrap_or_default().to_owned(),
                    lease.entry.clone(),
                    lease.worker.clone(),
                ],
            )
            .await?;
        Ok(match item(&[out], 0).as_deref() {
            Some("held") => Renewal::Held,
            Some("cancelled") => Renewal::Cancelled,
            Some("gone") => Renewal::Gone,
            Some("lost") => Renewal::Lost,
            _ => return Err(StoreError::Corrupt { detail: "unexpected renew reply".to_owned() }),
        })
    }

    async fn finish(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        outcome: TaskOutcome,
    ) -> Result<Settled, StoreError> {
        let (field, json) = match outcome {
            TaskOutcome::Result(r) => ("result", r),
            TaskOutcome::Error(e) => ("error", e),
        };
        self.settle(lease, job, status, vec![field.to_owned(), json]).await
    }

    async fn park(
        &self,
        lease: &Lease,
        job: &Job,
        input_requests: &RawByKey,
        state: Option<&str>,
    ) -> Result<Settled, StoreError> {
        let mut args = vec![state.unwrap_or_default().to_owned()];
        args.extend(pairs(input_requests));
        self.settle(lease, job, TaskStatus::InputRequired, args).await
    }

    async fn answer(&self, id: &TaskId, owner: &str, answers: &RawByKey) -> Result<Answered, StoreError> {
        let keys = &self.inner.keys;
        let args = [owner.to_owned(), keys.channel(id)].into_iter().chain(pairs(answers)).collect();
        let out =
            reply(self.script(Retry::No, &scripts::ANSWER, vec![keys.task(id), keys.jobs(id.shard())], args).await?)?;
        Ok(match item(&out, 0).as_deref() {
            Some("notfound") => Answered::NotFound,
            Some("idle") => Answered::NotWaiting(
                item(&out, 1)
                    .and_then(|s| parse_status(&s))
                    .ok_or_else(|| StoreError::Corrupt { detail: "answer reply without a status".to_owned() })?,
            ),
            Some("invalid") => Answered::Invalid(item(&out, 1).unwrap_or_default()),
            Some("waiting") => Answered::Waiting(item(&out, 1).and_then(|n| n.parse().ok()).unwrap_or(1)),
            Some("resumed") => Answered::Resumed,
            _ => return Err(StoreError::Corrupt { detail: "unexpected answer reply".to_owned() }),
        })
    }

    async fn release(&self, lease: &Lease, job: &Job) -> Result<Settled, StoreError> {
        let keys = &self.inner.keys;
        let out = self
            .script(
                Retry::No,
                &scripts::RELEASE,
                vec![keys.task(&lease.task), keys.jobs(lease.task.shard())],
                vec![lease.token.to_string(), job.entry.clone()],
            )
            .await?;
        settled(&out)
    }
}

/// Flattens raw JSON by key into script arguments: key, JSON, key, JSON, …
fn pairs(values: &RawByKey) -> impl Iterator<Item = String> + '_ {
    values.iter().flat_map(|(k, v)| [k.clone(), v.clone()])
}

/// Decodes the reply of `settle.lua` / `release.lua`.
fn settled(out: &Value) -> Result<Settled, StoreError> {
    Ok(match item(std::slice::from_ref(out), 0).as_deref() {
        Some("done") => Settled::Done,
        Some("terminal") => Settled::AlreadyTerminal,
        Some("lost") => Settled::Lost,
        Some("gone") => Settled::Gone,
        _ => return Err(StoreError::Corrupt { detail: "unexpected settle reply".to_owned() }),
    })
}

impl RedisStore {
    /// Runs `settle.lua`; `tail` is what follows the status (see the script's header).
    async fn settle(
        &self,
        lease: &Lease,
        job: &Job,
        status: TaskStatus,
        tail: Vec<String>,
    ) -> Result<Settled, StoreError> {
        let keys = &self.inner.keys;
        let args = [lease.token.to_string(), job.entry.clone(), keys.channel(&lease.task), status.as_str().to_owned()]
            .into_iter()
            .chain(tail)
            .collect();
        let out = self
            .script(Retry::No, &scripts::SETTLE, vec![keys.task(&lease.task), keys.jobs(lease.task.shard())], args)
            .await?;
        settled(&out)
    }
}

impl JobQueue for RedisStore {
    async fn read(&self, worker: &str, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        let inner = &self.inner;
        let mut reader = inner.reader.lock().await;
        if reader.is_none() {
            // A blocking read must not share a multiplexed connection with other callers, and
            // its response may take `block` longer than any other command.
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(inner.timeout))
                .set_response_timeout(Some(block + inner.timeout));
            let conn =
                tokio::time::timeout(inner.timeout, inner.client.get_multiplexed_async_connection_with_config(&config))
                    .await
                    .map_err(|_| StoreError::Timeout { millis: millis(inner.timeout) })??;
            *reader = Some(conn);
        }
        let Some(conn) = reader.as_mut() else { return Ok(Vec::new()) };
        let streams: Vec<String> = (0..inner.shards).map(|s| inner.keys.jobs(u8::try_from(s).unwrap_or(0))).collect();
        let ids = vec![">"; streams.len()];
        // COUNT applies per stream: spread `max` over the shards (rounding up, so each gets one).
        let per_stream = max.max(1).div_ceil(streams.len().max(1));
        let options = StreamReadOptions::default()
            .group(GROUP, worker)
            .count(per_stream)
            .block(usize::try_from(block.as_millis()).unwrap_or(usize::MAX));
        let read: redis::RedisResult<Option<StreamReadReply>> = conn.xread_options(&streams, &ids, &options).await;
        match read {
            Ok(reply) => Ok(reply.map(|r| jobs_of(r.keys.into_iter().flat_map(|k| k.ids))).unwrap_or_default()),
            Err(e) if e.code() == Some("NOGROUP") => {
                drop(reader);
                self.prepare().await?;
                Ok(Vec::new())
            }
            Err(e) => {
                *reader = None;
                Err(e.into())
            }
        }
    }

    async fn ack(&self, job: &Job) -> Result<(), StoreError> {
        let stream = self.inner.keys.jobs(job.task.shard());
        let entry = job.entry.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("XACK").arg(&stream).arg(GROUP).arg(&entry).ignore();
        pipe.cmd("XDEL").arg(&stream).arg(&entry).ignore();
        self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async::<()>(conn))).await
    }

    async fn reclaim(&self, worker: &str, idle: Duration, max: usize) -> Result<Vec<Job>, StoreError> {
        // One shard at a time, asking each only for the room left: whatever XAUTOCLAIM returns
        // is claimed for us (its idle time reset), so it must not be fetched and then dropped.
        let shards = self.inner.shards;
        let (first, starts) = {
            let cursor = self.inner.reclaim.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            (cursor.shard, cursor.starts.clone())
        };
        let mut jobs = Vec::new();
        for step in 0..shards {
            let remaining = max.saturating_sub(jobs.len());
            if remaining == 0 {
                break;
            }
            let shard = (first + step) % shards;
            let stream = self.inner.keys.jobs(u8::try_from(shard).unwrap_or(u8::MAX));
            let start = starts.get(usize::from(shard)).cloned().unwrap_or_else(|| "0-0".to_owned());
            let mut cmd = redis::cmd("XAUTOCLAIM");
            cmd.arg(&stream).arg(GROUP).arg(worker).arg(millis(idle)).arg(&start).arg("COUNT").arg(remaining);
            let reply: Value = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
            // [next-start-id, [[entry-id, [field, value, ...]], ...], [deleted ids]]
            let Value::Array(parts) = reply else { continue };
            let next = item(&parts, 0).unwrap_or_else(|| "0-0".to_owned());
            if let Some(Value::Array(entries)) = parts.get(1) {
                jobs.extend(entries.iter().filter_map(claimed_job));
            }
            let mut cursor = self.inner.reclaim.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(slot) = cursor.starts.get_mut(usize::from(shard)) {
                *slot = next.clone();
            }
            // Resume here next time unless this shard's scan completed.
            cursor.shard = if next == "0-0" { (shard + 1) % shards } else { shard };
        }
        Ok(jobs)
    }

    async fn forget_idle_workers(&self, idle: Duration) -> Result<usize, StoreError> {
        let mut forgotten = 0;
        for shard in 0..self.inner.shards {
            let stream = self.inner.keys.jobs(u8::try_from(shard).unwrap_or(u8::MAX));
            let names = self.idle_consumers(&stream, idle).await?;
            if names.is_empty() {
                continue;
            }
            // The script re-checks that each holds nothing; a live one that is forgotten is
            // recreated by the next job delivered to it.
            let out = self.script(Retry::Yes, &scripts::FORGET, vec![stream], names).await?;
            forgotten += usize::try_from(redis::from_redis_value::<i64>(out).unwrap_or(0)).unwrap_or(0);
        }
        Ok(forgotten)
    }
}

impl RedisStore {
    /// One shard's consumers that hold nothing and were idle longer than `idle`.
    async fn idle_consumers(&self, stream: &str, idle: Duration) -> Result<Vec<String>, StoreError> {
        let mut cmd = redis::cmd("XINFO");
        cmd.arg("CONSUMERS").arg(stream).arg(GROUP);
        let consumers: Vec<HashMap<String, Value>> =
            self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        let number = |c: &HashMap<String, Value>, field: &str| match c.get(field) {
            Some(Value::Int(n)) => Some(*n),
            _ => None,
        };
        Ok(consumers
            .iter()
            .filter(|c| {
                // `inactive` (Redis 7.2+: since the last successful read) where known, else `idle`.
                let quiet = number(c, "inactive").filter(|n| *n >= 0).or_else(|| number(c, "idle"));
                number(c, "pending") == Some(0) && quiet.is_some_and(|ms| ms.unsigned_abs() > millis(idle))
            })
            .filter_map(|c| c.get("name").and_then(|v| item(std::slice::from_ref(v), 0)))
            .collect())
    }
}

/// A job from one `XAUTOCLAIM` entry: `[entry-id, [field, value, ...]]`.
fn claimed_job(entry: &Value) -> Option<Job> {
    let Value::Array(pair) = entry else { return None };
    let (Some(entry_id), Some(Value::Array(fields))) = (item(pair, 0), pair.get(1)) else { return None };
    let task = fields.chunks(2).find_map(|kv| match kv {
        [k, v] if item(std::slice::from_ref(k), 0).as_deref() == Some("task") => {
            item(std::slice::from_ref(v), 0).and_then(|s| TaskId::parse(&s))
        }
        _ => None,
    })?;
    Some(Job { task, entry: entry_id })
}

fn jobs_of(entries: impl Iterator<Item = redis::streams::StreamId>) -> Vec<Job> {
    entries
        .filter_map(|entry| {
            let task: String = entry.get("task")?;
            Some(Job { task: TaskId::parse(&task)?, entry: entry.id })
        })
        .collect()
}

impl EventBus for RedisStore {
    async fn subscribe(&self, id: &TaskId) -> Result<Subscription, StoreError> {
        self.inner.subscriber.subscribe(id).await
    }

    async fn publish(&self, id: &TaskId, event: TaskEvent) -> Result<(), StoreError> {
        let channel = self.inner.keys.channel(id);
        let payload = match event {
            TaskEvent::Status(s) => s.as_str(),
            TaskEvent::Resync => "resync",
        };
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&channel).arg(payload);
        self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(async move { cmd.query_async::<i64>(conn).await.map(drop) }))
            .await
    }
}

impl OnceMarks for RedisStore {
    async fn first_use(&self, id: &str, expires_at_ms: u64) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.inner.keys.once(id)).arg(1).arg("NX").arg("PXAT").arg(expires_at_ms.max(1));
        // Not retried: after a lost reply the retry would find its own mark and say "used".
        let set: Option<String> = self.call(Retry::No, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        Ok(set.is_some())
    }
}
