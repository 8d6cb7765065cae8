//! A Redis Cluster with a replica per primary loses a primary (SIGKILL) and its replica is
//! promoted: the same store value serves that shard again in bounded time (its cluster
//! connection and its per-shard job reader follow the new primary), and every task written
//! with `replicas_ack = 1` before the death is still there.

use std::time::Duration;

use mcpgate_store::testing::RedisCluster;
use mcpgate_store::{Created, JobQueue as _, Read, RedisOptions, RedisStore, StoreError, TaskStore as _};
use tokio::time::Instant;

use crate::replicas_ack::keyed;

const SHARDS: u16 = 8;

/// How long a failover and the store's recovery from it may take: cluster-node-timeout
/// (2 s) to mark the primary failed, the replica's election, and the store's reconnects.
const RECOVERY: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_store_follows_a_promoted_replica_and_loses_no_acknowledged_task() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    let prefix = format!("fo{}", std::process::id());
    let store = RedisStore::connect(RedisOptions {
        url: cluster.urls(),
        cluster: true,
        prefix: prefix.clone(),
        shards: SHARDS,
        pool_size: 2,
        command_timeout: Duration::from_secs(2),
        at_rest: None,
        at_rest_window: Duration::ZERO,
        replicas_ack: 1,
        replicas_ack_timeout: Duration::from_millis(500),
    })
    .await
    .expect("connects");

    // Two tasks on every shard (the scope's first byte picks it), each confirmed by the
    // replica of its shard's primary; their jobs taken by this worker's shard readers.
    let mut tasks = Vec::new();
    for scope in 0..2 * SHARDS {
        let created = store.create(keyed("fo", u8::try_from(scope).expect("small"))).await.expect("create");
        let Created::New(record) = created else { panic!("a new task: {created:?}") };
        tasks.push(record);
    }
    let mut taken = 0;
    let deadline = Instant::now() + RECOVERY;
    while taken < tasks.len() {
        assert!(Instant::now() < deadline, "the shard readers delivered {taken} of {} jobs", tasks.len());
        taken += store.read("w", 32, Duration::from_millis(500)).await.expect("read").len();
    }

    let slot = cluster.slot_of(&format!("{{{prefix}:00}}"));
    let victim = cluster.primary_of_slot(slot).expect("shard 0 has a primary");
    cluster.kill_node(victim);
    cluster.wait_for_new_primary(slot, victim, RECOVERY);

    // The same store value writes to shard 0 again. Its new primary has no replica yet, so
    // a write lands but is not confirmed: NotAcknowledged (not unavailable, not a timeout)
    // shows it reached the new primary.
    let deadline = Instant::now() + RECOVERY;
    let landed = loop {
        match store.create(keyed("fo", 64)).await {
            Err(StoreError::NotAcknowledged { wanted: 1, got: 0 }) => break None,
            Ok(Created::New(record)) => break Some(record),
            other => {
                assert!(Instant::now() < deadline, "shard 0 did not take writes within {RECOVERY:?}: {other:?}");
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    assert!(landed.is_none(), "with its replica dead the new primary cannot confirm a write to one replica");

    // Every task confirmed before the death is still there.
    for task in &tasks {
        let read = store.get(&task.id, Read::Control).await.expect("get");
        assert!(read.is_some(), "task {} (shard {}) was lost in the failover", task.id, task.id.shard());
    }

    // The dead node comes back as the new primary's replica; writes are confirmed again, and
    // the job of the task that landed meanwhile reaches this worker's reader for shard 0.
    cluster.restart_node(victim);
    cluster.wait_until_ok(RECOVERY);
    cluster.wait_for_replicas(RECOVERY);
    let retried = store.create(keyed("fo", 64)).await.expect("confirmed once a replica is back");
    let Created::Existing(record) = retried else { panic!("the retry gets the task that landed: {retried:?}") };
    assert_eq!(record.id.shard(), 0);
    let deadline = Instant::now() + RECOVERY;
    loop {
        let jobs = store.read("w", 32, Duration::from_millis(500)).await.expect("read");
        if jobs.iter().any(|j| j.task == record.id) {
            break;
        }
        assert!(Instant::now() < deadline, "shard 0's reader delivered no new job within {RECOVERY:?}");
    }
}
