//! A Redis Cluster with a replica per primary loses a primary (SIGKILL) and its replica is
//! promoted: the same store value serves that shard again in bounded time (its cluster
//! connection, its per-shard job reader and its event subscriber follow), and every task
//! written with `replicas_ack = 1` before the death is still there.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::RedisCluster;
use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::{
    Created, EventBus as _, JobQueue as _, Read, RedisOptions, RedisStore, StoreError, TaskEvent, TaskStore as _,
};

use crate::replicas_ack::keyed;

const SHARDS: u16 = 8;

/// How long a failover and the store's recovery from it may take: cluster-node-timeout
/// (2 s) to mark the primary failed, the replica's election, and the store's reconnects.
const RECOVERY: Duration = Duration::from_secs(30);

/// How long a write waits for its replica: long, so a confirmation the test relies on is not
/// refused on a busy machine (the one write that cannot be confirmed waits this long once).
const ACK_WITHIN: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_store_follows_a_promoted_replica_and_loses_no_acknowledged_task() {
    let mut cluster = RedisCluster::start_with_replicas(3);
    // The victim is the first seed node, whose death every connection of the store feels:
    // the event subscriber's (it uses the first seed), and a shard's (a prefix under which
    // some shard lives on it).
    let victim = 0;
    let (prefix, shard) = (0..)
        .find_map(|n| {
            let prefix = format!("fo{n}");
            let shard = (0..SHARDS)
                .find(|s| cluster.primary_of_slot(cluster.slot_of(&format!("{{{prefix}:{s:02x}}}"))) == Some(victim))?;
            Some((prefix, shard))
        })
        .expect("a prefix with a shard on the first seed");
    let slot = cluster.slot_of(&format!("{{{prefix}:{shard:02x}}}"));
    let on_shard = |k: u16| u8::try_from(shard + SHARDS * k).expect("small");
    let store = RedisStore::connect(RedisOptions {
        url: cluster.urls(),
        cluster: true,
        prefix: prefix.clone(),
        shards: SHARDS,
        pool_size: 2,
        command_timeout: ACK_WITHIN * 2,
        at_rest: None,
        at_rest_window: Duration::ZERO,
        replicas_ack: 1,
        replicas_ack_timeout: ACK_WITHIN,
        tls_ca_pem: None,
        sentinel: None,
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
    // Each read blocks up to 500 ms itself.
    wait_every(
        format_args!("the shard readers to deliver all {} jobs", tasks.len()),
        RECOVERY,
        Duration::ZERO,
        async || {
            if taken >= tasks.len() {
                return Look::Done(());
            }
            taken += store.read("w", 32, Duration::from_millis(500)).await.expect("read").len();
            Look::NotYet(format!("{taken} delivered"))
        },
    )
    .await;

    cluster.kill_node(victim);
    let promoted = cluster.wait_for_new_primary(slot, victim, RECOVERY);

    // The same store value writes to the shard again. Its new primary has no replica yet, so
    // a write lands but is not confirmed: NotAcknowledged (not unavailable, not a timeout)
    // shows it reached the new primary.
    let what = format!("shard {shard} to take writes");
    let landed = wait_every(what, RECOVERY, Duration::from_millis(200), async || {
        match store.create(keyed("fo", on_shard(8))).await {
            Err(StoreError::NotAcknowledged { wanted: 1, got: 0 }) => Look::Done(None),
            Ok(Created::New(record)) => Look::Done(Some(record)),
            other => Look::not_yet(other),
        }
    })
    .await;
    assert!(landed.is_none(), "with its replica dead the new primary cannot confirm a write to one replica");

    // Every task confirmed before the death is still there.
    for task in &tasks {
        let read = store.get(&task.id, Read::Control).await.expect("get");
        assert!(read.is_some(), "task {} (shard {}) was lost in the failover", task.id, task.id.shard());
    }

    // Task events reach this replica again (its subscriber moved to another seed).
    let mut events = store.subscribe(&tasks[usize::from(shard)].id).await.expect("subscribe");
    // Each look waits up to 200 ms for the event itself.
    wait_every("a task event heard after the failover", RECOVERY, Duration::ZERO, async || {
        // A publish may still meet a connection the death broke: the wait tries again.
        let published = store.publish(&tasks[usize::from(shard)].id, TaskEvent::Status(TaskStatus::Working)).await;
        if let Err(e) = published {
            return Look::NotYet(format!("publish: {e}"));
        }
        match tokio::time::timeout(Duration::from_millis(200), events.next()).await {
            Ok(TaskEvent::Status(TaskStatus::Working)) => Look::Done(()),
            heard => Look::not_yet(heard),
        }
    })
    .await;

    // The dead node comes back as the new primary's replica; writes are confirmed again, and
    // the job of the task that landed meanwhile reaches this worker's reader for the shard.
    cluster.restart_node(victim);
    cluster.wait_until_ok(RECOVERY);
    cluster.wait_for_replicas(RECOVERY);
    // The retry comes once the returned node holds what its primary wrote (by its own
    // offset), not merely once its link is up.
    cluster.nodes()[victim].wait_until_caught_up_with(&cluster.nodes()[promoted], RECOVERY);
    let retried = store.create(keyed("fo", on_shard(8))).await.expect("confirmed once a replica is back");
    let Created::Existing(record) = retried else { panic!("the retry gets the task that landed: {retried:?}") };
    assert_eq!(u16::from(record.id.shard()), shard);
    // Each read blocks up to 500 ms itself.
    wait_every(format_args!("shard {shard}'s reader to deliver the new job"), RECOVERY, Duration::ZERO, async || {
        let jobs = store.read("w", 32, Duration::from_millis(500)).await.expect("read");
        if jobs.iter().any(|j| j.task == record.id) { Look::Done(()) } else { Look::not_yet(jobs) }
    })
    .await;
}
