//! A worker that stops reading (a drained replica, or one shutting down) holds no job created
//! afterwards: on one Redis server its blocking read is ended, on a Redis Cluster its per-shard
//! readers pause and hand back what they had taken; another worker gets every job at once,
//! not after a reclaim.

use std::collections::BTreeSet;
use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::testing::{RedisCluster, RedisServer};
use mcpgate_store::{JobQueue as _, RedisOptions, RedisStore, TaskStore as _};

/// A task of its own call: distinct idempotency scopes spread the tasks over the shards.
fn task(n: u8) -> mcpgate_store::NewTask {
    mcpgate_store::NewTask { indexed: false, ..crate::redis::new_task("drainer", [n; 32]) }
}

async fn stopped_readers_take_no_new_job(options: RedisOptions) {
    let stopped = RedisStore::connect(options.clone()).await.expect("connects");
    let active = RedisStore::connect(options).await.expect("connects");
    let block = Duration::from_millis(200);
    assert!(stopped.read("stopped", 4, block).await.expect("read").is_empty(), "nothing queued yet");
    stopped.stop_reading().await;
    let mut created = BTreeSet::new();
    for n in 0..8 {
        created.insert(active.create(task(n)).await.expect("create").record().expect("a task").id.clone());
    }
    let mut seen = BTreeSet::new();
    // Each read blocks up to `block` itself.
    let what = format!("the active worker to get every job of {created:?}, none stuck with the stopped worker");
    wait_every(what, Duration::from_secs(5), Duration::ZERO, async || {
        if seen == created {
            return Look::Done(());
        }
        for job in active.read("active", 16, block).await.expect("read") {
            seen.insert(job.task.clone());
            active.ack(&job).await.expect("ack");
        }
        Look::not_yet(&seen)
    })
    .await;
}

#[tokio::test]
async fn a_stopped_worker_takes_no_new_job_on_one_server() {
    let server = RedisServer::start();
    stopped_readers_take_no_new_job(crate::redis::options(&server)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_worker_takes_no_new_job_on_a_cluster() {
    let cluster = RedisCluster::start(3);
    stopped_readers_take_no_new_job(RedisOptions {
        url: cluster.urls(),
        sentinel: None,
        cluster: true,
        prefix: format!("drain{}", std::process::id()),
        shards: 8,
        pool_size: 2,
        command_timeout: Duration::from_secs(2),
        at_rest: None,
        at_rest_window: Duration::ZERO,
        replicas_ack: 0,
        replicas_ack_timeout: Duration::ZERO,
        tls_ca_pem: None,
    })
    .await;
}
