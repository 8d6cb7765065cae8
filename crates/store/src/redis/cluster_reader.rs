//! Reading the job queue from a Redis Cluster. The shards' streams live in different slots
//! (usually on different nodes) and one `XREADGROUP` may not span slots, so each shard has
//! its own reader task on its own cluster connection, blocking on its stream and handing
//! jobs to the worker through a bounded channel.
//!
//! Invariants: a shard task reads one job at a time and only after reserving room in the
//! channel, so at most `2 × shards` jobs are delivered to this worker and not yet taken;
//! the tasks end once the reader is dropped (within one blocking read). Paused (the worker
//! stopped reading, e.g. it drains), they start no read, and a job a read in flight still
//! brings is handed back to the queue at once; the next read resumes them.

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
    /// Whether the shard tasks hold off (a watch, so they wake when it changes).
    paused: tokio::sync::watch::Sender<bool>,
}

impl ClusterReader {
    /// Starts one reader task per stream for consumer `worker`.
    pub(super) fn start(client: ClusterClient, streams: Vec<String>, worker: &str, block: Duration) -> Self {
        let (tx, rx) = mpsc::channel(streams.len().max(1));
        let paused = tokio::sync::watch::Sender::new(false);
        for stream in streams {
            let shard = Shard { client: client.clone(), stream, worker: worker.to_owned(), block };
            tokio::spawn(shard_loop(shard, tx.clone(), paused.subscribe()));
        }
        Self { jobs: Mutex::new(rx), paused }
    }

    /// Stops the shard tasks reading and returns the jobs they had delivered and nobody took,
    /// for the caller to hand back.
    pub(super) async fn pause(&self) -> Vec<Job> {
        self.paused.send_replace(true);
        let mut jobs = self.jobs.lock().await;
        let mut held = Vec::new();
        while let Ok(job) = jobs.try_recv() {
            held.push(job);
        }
        held
    }

    /// Waits up to `block` for a job, then takes what else is ready, up to `max` (resuming
    /// the shard tasks if they were paused).
    pub(super) async fn read(&self, max: usize, block: Duration) -> Result<Vec<Job>, StoreError> {
        self.paused.send_if_modified(|paused| std::mem::replace(paused, false));
        let mut jobs = self.jobs.lock().await;
        let first = match tokio::time::timeout(block, jobs.recv()).await {
            Err(_) => return Ok(Vec::new()),
            Ok(None) => return Err(StoreError::unavailable("the cluster job readers stopped")),
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

/// What one shard task reads, and as whom.
struct Shard {
    client: ClusterClient,
    stream: String,
    worker: String,
    block: Duration,
}

/// Reads one shard's stream until the reader is dropped.
async fn shard_loop(shard: Shard, tx: mpsc::Sender<Job>, mut paused: tokio::sync::watch::Receiver<bool>) {
    let Shard { client, stream, worker, block } = shard;
    let mut conn: Option<ClusterConnection> = None;
    let mut backoff = Duration::from_millis(100);
    let options = StreamReadOptions::default()
        .group(GROUP, &worker)
        .count(1)
        .block(usize::try_from(block.as_millis()).unwrap_or(usize::MAX));
    loop {
        if paused.wait_for(|paused| !paused).await.is_err() {
            return;
        }
        // Room first: a job read is always handed over.
        let Ok(permit) = tx.reserve().await else { return };
        let c = match &mut conn {
            Some(c) => c,
            None => match client.get_async_connection().await {
                Ok(c) => conn.insert(c),
                Err(e) => {
                    tracing::warn!(error = &e as &dyn std::error::Error, %stream, "cluster job reader cannot connect; retrying");
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
                    // Paused while the read was in flight: back to the queue, for any worker.
                    Some(job) if *paused.borrow() => {
                        drop(permit);
                        let mut back = super::scripts::HAND_BACK.prepare_invoke();
                        back.key(&stream).arg(&job.entry).arg(job.task.as_str());
                        if let Err(e) = back.invoke_async::<i64>(c).await {
                            // Still pending here: reclaimed by another worker once idle.
                            tracing::warn!(error = &e as &dyn std::error::Error, %stream, "handing back a job read while paused failed");
                        }
                    }
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
                    tracing::warn!(error = &e as &dyn std::error::Error, %stream, "creating a consumer group failed");
                    tokio::time::sleep(backoff).await;
                }
            }
            Err(e) => {
                drop(permit);
                tracing::warn!(error = &e as &dyn std::error::Error, %stream, "cluster job read failed; reconnecting");
                conn = None;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
            }
        }
    }
}
