//! The job queue on Redis: per-shard streams read by one consumer group. With one server,
//! one blocking `XREADGROUP` covers every shard; in a cluster each shard has its own reader
//! (see `cluster_reader`). Reclaiming scans one shard at a time, after sweeping the lease
//! indexes (tasks run where they were created) for lapsed leases, whose tasks it enqueues.
//!
//! The sweep compares lease deadlines (Redis's clock) with this replica's clock only to pick
//! candidates: `lapse.lua` decides on Redis's clock, so a skewed replica clock delays a
//! takeover (by the skew) but never takes a live lease.

use std::collections::HashMap;
use std::time::Duration;

use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::{AsyncCommands as _, AsyncConnectionConfig, Value};

use super::cluster_reader::ClusterReader;
use super::keys::GROUP;
use super::record::item;
use super::{Backend, RedisStore, Retry, scripts};
use crate::clock::millis;
use crate::contract::JobQueue;
use crate::error::StoreError;
use crate::model::{Job, TaskId};

impl JobQueue for RedisStore {
    async fn read(&self, worker: &str, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        let inner = &self.inner;
        let source = match &inner.backend {
            Backend::Single { source, .. } => source,
            Backend::Cluster { urls, trust, .. } => {
                let reader = inner
                    .cluster_reader
                    .get_or_try_init(|| async {
                        let streams =
                            (0..inner.shards).map(|s| inner.keys.jobs(u8::try_from(s).unwrap_or(0))).collect();
                        // Its own client: a blocking read's reply may take `block` longer.
                        let client = trust
                            .cluster(urls.clone())?
                            .connection_timeout(inner.timeout)
                            .response_timeout(block + inner.timeout)
                            .build()?;
                        Ok::<_, StoreError>(ClusterReader::start(client, streams, worker, block))
                    })
                    .await?;
                return reader.read(max, block).await;
            }
        };
        let mut reader = inner.reader.lock().await;
        if reader.is_none() {
            // A blocking read must not share a multiplexed connection with other callers, and
            // its response may take `block` longer than any other command.
            let config = AsyncConnectionConfig::new()
                .set_connection_timeout(Some(inner.timeout))
                .set_response_timeout(Some(block + inner.timeout));
            let node = source.node().await?;
            inner.reader_epoch.store(node.epoch, std::sync::atomic::Ordering::Release);
            let mut conn =
                tokio::time::timeout(inner.timeout, node.client.get_multiplexed_async_connection_with_config(&config))
                    .await
                    .map_err(|_| StoreError::Timeout { millis: millis(inner.timeout) })??;
            // Known so that `stop_reading` can end a blocking read left in flight.
            let id: i64 = tokio::time::timeout(inner.timeout, redis::cmd("CLIENT").arg("ID").query_async(&mut conn))
                .await
                .map_err(|_| StoreError::Timeout { millis: millis(inner.timeout) })??;
            inner.reader_client.store(id, std::sync::atomic::Ordering::Release);
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
                if super::pool::is_connection_failure(&e) {
                    source.retire(inner.reader_epoch.load(std::sync::atomic::Ordering::Acquire));
                }
                Err(e.into())
            }
        }
    }

    async fn hand_back(&self, jobs: &[Job]) -> Result<(), StoreError> {
        // One script per job (each in its shard's slot), sent together. Not retried after a
        // dead connection: a handed-back job that is still pending is reclaimed anyway.
        let invocations: Vec<redis::ScriptInvocation<'static>> = jobs
            .iter()
            .map(|job| {
                let mut invocation = scripts::HAND_BACK.prepare_invoke();
                invocation.key(self.inner.keys.jobs(job.task.shard())).arg(&job.entry).arg(job.task.as_str());
                invocation
            })
            .collect();
        if invocations.is_empty() {
            return Ok(());
        }
        self.call(Retry::No, invocations.as_slice(), |conn, invocations| {
            Box::pin(async move {
                futures_util::future::try_join_all(invocations.iter().map(|invocation| {
                    let mut conn = conn.clone();
                    async move { invocation.invoke_async::<i64>(&mut conn).await }
                }))
                .await
                .map(drop)
            })
        })
        .await
    }

    async fn ack(&self, job: &Job) -> Result<(), StoreError> {
        if job.entry.is_empty() {
            // Run where created: no queue entry, only its lease in the lease index.
            let mut cmd = redis::cmd("ZREM");
            cmd.arg(self.inner.keys.leases(job.task.shard())).arg(job.task.as_str());
            return self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async::<()>(conn))).await;
        }
        let stream = self.inner.keys.jobs(job.task.shard());
        let entry = job.entry.clone();
        let mut pipe = redis::pipe();
        pipe.cmd("XACK").arg(&stream).arg(GROUP).arg(&entry).ignore();
        pipe.cmd("XDEL").arg(&stream).arg(&entry).ignore();
        self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async::<()>(conn))).await
    }

    async fn reclaim(&self, worker: &str, idle: Duration, max: usize) -> Result<Vec<Job>, StoreError> {
        self.sweep_lapsed(max).await?;
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

    async fn stop_reading(&self) {
        // A cluster's per-shard readers pause (the next read resumes them); the jobs they had
        // delivered go back to the queue.
        if let Some(reader) = self.inner.cluster_reader.get() {
            let held = reader.pause().await;
            if !held.is_empty()
                && let Err(e) = self.hand_back(&held).await
            {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "handing back jobs held by the paused cluster readers failed"
                );
            }
            return;
        }
        let id = self.inner.reader_client.swap(0, std::sync::atomic::Ordering::AcqRel);
        if id == 0 {
            return;
        }
        let mut cmd = redis::cmd("CLIENT");
        cmd.arg("UNBLOCK").arg(id);
        if let Err(e) = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async::<i64>(conn))).await {
            // The read ends within its block time; a job it takes meanwhile is reclaimed later.
            tracing::warn!(error = &e as &dyn std::error::Error, "could not end the job reader's blocking read");
        }
        // The connection is not reused: a later read opens a fresh one.
        *self.inner.reader.lock().await = None;
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

/// Most lapsed leases one sweep looks at per shard.
const SWEEP_BATCH: usize = 64;

impl RedisStore {
    /// Enqueues tasks whose run-where-created lease lapsed (at most `max`, taken evenly from
    /// the shards): one range read per shard, sent together, then `lapse.lua` for each
    /// candidate, sent together; nothing more when no lease lapsed.
    async fn sweep_lapsed(&self, max: usize) -> Result<(), StoreError> {
        let keys = &self.inner.keys;
        let now = crate::clock::now_ms();
        let per_shard = max.clamp(1, SWEEP_BATCH);
        let shards: Vec<u8> = (0..self.inner.shards).map(|s| u8::try_from(s).unwrap_or(u8::MAX)).collect();
        let ranges = shards
            .iter()
            .map(|shard| {
                let mut cmd = redis::cmd("ZRANGE");
                cmd.arg(keys.leases(*shard)).arg("-inf").arg(now).arg("BYSCORE").arg("LIMIT").arg(0).arg(per_shard);
                cmd
            })
            .collect();
        let lapsed: Vec<Vec<String>> = self.call_each(Retry::Yes, ranges).await?;
        let invocations: Vec<redis::ScriptInvocation<'static>> = lapsed
            .iter()
            .flatten()
            .filter_map(|id| TaskId::parse(id))
            .map(|id| {
                let shard = id.shard();
                let mut invocation = scripts::LAPSE.prepare_invoke();
                invocation.key(keys.task(&id)).key(keys.leases(shard)).key(keys.jobs(shard)).arg(id.as_str());
                invocation
            })
            .collect();
        if invocations.is_empty() {
            return Ok(());
        }
        // Safe to repeat: a second run finds the entry gone and enqueues nothing.
        let outcomes: Vec<String> = self
            .call(Retry::Yes, invocations.as_slice(), |conn, invocations| {
                Box::pin(futures_util::future::try_join_all(invocations.iter().map(|invocation| {
                    let mut conn = conn.clone();
                    async move { invocation.invoke_async::<String>(&mut conn).await }
                })))
            })
            .await?;
        let queued = outcomes.iter().filter(|o| *o == "queued").count();
        if queued > 0 {
            tracing::info!(tasks = queued, "enqueued tasks whose run-where-created lease lapsed");
        }
        Ok(())
    }

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
