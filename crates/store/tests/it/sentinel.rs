//! The store behind Redis Sentinel (one primary, two replicas, three sentinels, all real
//! processes): the conformance suite, and the same store value following the primary — after
//! a `kill -9` of it, after a graceful failover, and after a demotion under live connections
//! (whose writes then meet `-READONLY`).

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::testing::{RedisSentinelSet, run_suite};
use mcpgate_store::{
    EventBus as _, JobQueue as _, Read, RedisOptions, RedisStore, SentinelOptions, TaskEvent, TaskStore as _,
};
use tokio::time::Instant;

use crate::redis::{at_rest, new_task};

fn options(set: &RedisSentinelSet) -> RedisOptions {
    RedisOptions {
        url: String::new(),
        sentinel: Some(SentinelOptions {
            addresses: set.sentinel_addresses(),
            master_name: set.master_name().to_owned(),
            tls: false,
            username: None,
            password: None,
            sentinel_username: None,
            sentinel_password: None,
        }),
        cluster: false,
        prefix: format!("s{}", std::process::id()),
        shards: 4,
        pool_size: 4,
        command_timeout: Duration::from_secs(1),
        replicas_ack: 0,
        replicas_ack_timeout: Duration::from_millis(500),
        at_rest: Some(at_rest(true)),
        at_rest_window: Duration::ZERO,
        tls_ca_pem: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_store_honours_the_contract() {
    let set = RedisSentinelSet::start();
    let n = std::sync::atomic::AtomicU32::new(0);
    run_suite(|| async {
        let mut options = options(&set);
        // Each part of the suite on keys of its own, as it expects a fresh store.
        options.prefix = format!("{}-{}", options.prefix, n.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        RedisStore::connect(options).await.expect("connects through the sentinels")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(clippy::print_stderr, reason = "the measured failover time is reported (BENCHMARKS.md)")]
async fn the_store_follows_the_primary_after_it_is_killed() {
    let mut set = RedisSentinelSet::start();
    let store = RedisStore::connect(options(&set)).await.expect("connects through the sentinels");
    let before = store.create(new_task("alice", [1; 32])).await.expect("create").record().expect("a task").id.clone();
    set.wait_for_replicas_in_sync(Duration::from_secs(10));

    let killed = Instant::now();
    set.kill_primary();
    let after = serving_again(&store, 2, Duration::from_secs(30)).await;
    let serving = killed.elapsed();
    let primary = set.wait_for_new_primary(Duration::from_secs(5));
    eprintln!("kill -9 of the primary to the store serving writes again: {serving:?} (new primary on port {primary})");

    let read = store.get(&before, Read::Full).await.expect("read after the failover");
    assert!(read.is_some(), "the task written (and replicated) before the kill is still there");
    jobs_and_events_flow_again(&store, &after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_follows_a_graceful_failover() {
    let mut set = RedisSentinelSet::start();
    let store = RedisStore::connect(options(&set)).await.expect("connects through the sentinels");
    store.create(new_task("alice", [1; 32])).await.expect("create before the failover");
    set.wait_for_replicas_in_sync(Duration::from_secs(10));

    let old = set.failover();
    let primary = set.wait_for_new_primary(Duration::from_secs(20));
    assert_ne!(old, primary);
    let after = serving_again(&store, 3, Duration::from_secs(20)).await;
    jobs_and_events_flow_again(&store, &after).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_readonly_reply_sends_the_store_to_the_new_primary() {
    let mut set = RedisSentinelSet::start();
    let store = RedisStore::connect(options(&set)).await.expect("connects through the sentinels");
    // Every pooled connection is live on the primary.
    for seed in 0..4 {
        store.create(new_task("alice", [seed; 32])).await.expect("create before the demotion");
    }
    set.wait_for_replicas_in_sync(Duration::from_secs(10));
    set.demote_primary_under_its_clients();
    // The pool's connections still lead to the old primary, a replica now: its `-READONLY`
    // must retire them and send the store to the primary the sentinels name.
    let after = serving_again(&store, 9, Duration::from_secs(10)).await;
    jobs_and_events_flow_again(&store, &after).await;
}

/// Creates tasks (digest byte `seed`) until one succeeds, within `patience`; returns its id.
/// Calls in flight during the switch may fail (Unavailable or Timeout), never succeed wrongly.
async fn serving_again(store: &RedisStore, seed: u8, patience: Duration) -> mcpgate_store::TaskId {
    wait_every("the store to serve writes", patience, Duration::from_millis(50), async || {
        match store.create(new_task("alice", [seed; 32])).await {
            Ok(created) => {
                let id = created.record().expect("a task").id.clone();
                let read = store.get(&id, Read::Full).await.expect("the task just created reads back");
                assert!(read.is_some(), "the task just created is on the primary that acknowledged it");
                Look::Done(id)
            }
            Err(e @ (mcpgate_store::StoreError::Unavailable { .. } | mcpgate_store::StoreError::Timeout { .. })) => {
                Look::NotYet(e.to_string())
            }
            Err(e) => panic!("a failover must fail calls as Unavailable or Timeout, got: {e}"),
        }
    })
    .await
}

/// The job reader delivers the job of `task` (created on the new primary), and an event
/// published now reaches a subscriber (the subscriber reconnected to the new primary).
async fn jobs_and_events_flow_again(store: &RedisStore, task: &mcpgate_store::TaskId) {
    // A read blocks up to 200 ms itself; one that fails is looked at again after 50 ms.
    let what = "the job reader to deliver the new task's job";
    wait_every(what, Duration::from_secs(20), Duration::ZERO, async || {
        match store.read("w1", 16, Duration::from_millis(200)).await {
            Ok(jobs) if jobs.iter().any(|j| &j.task == task) => Look::Done(()),
            Ok(jobs) => Look::not_yet(jobs),
            // The reader's connection may still lead to the old primary: it reconnects.
            Err(e) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                Look::NotYet(e.to_string())
            }
        }
    })
    .await;
    let what = "an event delivered to a subscriber after the failover";
    wait_every(what, Duration::from_secs(20), Duration::from_millis(100), async || {
        let mut subscription = match store.subscribe(task).await {
            Ok(subscription) => subscription,
            Err(e) => return Look::NotYet(format!("subscribe: {e}")),
        };
        if let Err(e) = store.publish(task, TaskEvent::Resync).await {
            return Look::NotYet(format!("publish: {e}"));
        }
        match tokio::time::timeout(Duration::from_secs(2), subscription.next()).await {
            Ok(_) => Look::Done(()),
            Err(_) => Look::NotYet("no event within 2 s".to_owned()),
        }
    })
    .await;
}
