//! Reading the job queue from a Redis Cluster. The shards' streams live in different slots
//! (usually on different nodes) and one `XREADGROUP` may not span slots, so each shard has
//! its own reader task on its own cluster connection, blocking on its stream and handing
//! jobs to the worker through a bounded channel.
//!
//! Invariants: a shard task reads one job at a time and only after reserving room in the
//! channel, so at most `2 × shards` jobs are delivered to this worker and not yet taken;
//! the tasks end once the reader is dropped (within one blocking read).

use std::time::Duration;

use redis::AsyncCommands as _;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::streams::{StreamReadOptions, StreamReadReply};
use tokio::sync::{Mutex, mpsc};

use super::keys::GROUP;
use crate::error::StoreError;
use crate::model::{Job, TaskId};

/// The shard reader tasks of one worker, and the jobs they deliver.
pub(super) struct ClusterReader {
    jobs: Mutex<mpsc::Receiver<Job>>,
}

impl ClusterReader {
    /// Starts one reader task per stream for consumer `worker`.
    pub(super) fn start(client: ClusterClient, streams: Vec<String>, worker: &str, block: Duration) -> Self {
        let (tx, rx) = mpsc::channel(streams.len().max(1));
        for stream in streams {
            tokio::spawn(shard_loop(client.clone(), stream, worker.to_owned(), block, tx.clone()));
        }
        Self { jobs: Mutex::new(rx) }
    }

    /// Waits up to `block` for a job, then takes what else is ready, up to `max`.
    pub(super) async fn read(&self, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        let mut jobs = self.jobs.lock().await;
        let first = match tokio::time::timeout(block, jobs.recv()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(None) => return Err(StoreError::Unavailable { detail: "the cluster job readers stopped".to_owned() }),
            Ok(Some(job)) => job,
        };
        let mut out = vec![first];
        while out.len() < max.max(1) {
            match jobs.try_recv() {
                Ok(job) => out.push(job),
                Err(_) => break,
            }
        }
        Ok(out)
    }
}

/// Reads one shard's stream until the reader is dropped.
async fn shard_loop(client: ClusterClient, stream: String, worker: String, block: Duration, tx: mpsc::Sender<Job>) {
    let mut conn: Option<ClusterConnection> = None;
    let mut backoff = Duration::from_millis(100);
    let options = StreamReadOptions::default()
        .group(GROUP, &worker)
        .count(1)
        .block(usize::try_from(block.as_millis()).unwrap_or(usize::MAX));
    loop {
        // Room first: a job read is always handed over.
        let Ok(permit) = tx.reserve().await else { return };
        let c = match &mut conn {
            Some(c) => c,
            None => match client.get_async_connection().await {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::warn!(error = %e, %stream, "cluster job reader cannot connect; retrying");
                    drop(permit);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            },
        };
        let read: redis::RedisResult<Option<StreamReadReply>> = c.xread_options(&[&stream], &[">"], &options).await;
        match read {
            Ok(reply) => {
                backoff = Duration::from_millis(100);
                let job = reply.into_iter().flat_map(|r| r.keys).flat_map(|k| k.ids).find_map(|entry| {
                    let task: String = entry.get("task")?;
                    Some(Job { task: TaskId::parse(&task)?, entry: entry.id })
                });
                match job {
                    Some(job) => permit.send(job),
                    None => drop(permit),
                }
            }
            Err(e) if e.code() == Some("NOGROUP") => {
                drop(permit);
                let mut create = redis::cmd("XGROUP");
                create.arg("CREATE").arg(&stream).arg(GROUP).arg("0").arg("MKSTREAM");
                if let Err(e) = create.query_async::<()>(c).await
                    && e.code() != Some("BUSYGROUP")
                {
                    tracing::warn!(error = %e, %stream, "creating a consumer group failed");
                    tokio::time::sleep(backoff).await;
                }
            }
            Err(e) => {
                drop(permit);
                tracing::warn!(error = %e, %stream, "cluster job read failed; reconnecting");
                conn = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
