//! The Redis store's cache of finished task records, against a real `redis-server`: a second
//! read of a finished task makes no round trip, a task not finished is always read from Redis,
//! a purge on one replica is seen by another within a bounded wait, an entry goes at the
//! task's expiry and when the subscriber's connection is lost, and the bounds hold.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::{
    Created, EventBus as _, NewTask, PurgeFilter, Purged, Read, RedisStore, TaskAdmin as _, TaskId, TaskOutcome,
    TaskStore as _, TerminalCacheLimits,
};

use crate::redis::{Monitor, new_task, options, warm_up_the_reader};

/// A task of `owner` run here and finished with `result`; `ttl_ms` to live.
async fn finished(store: &RedisStore, owner: &str, result: &str, ttl_ms: u64) -> TaskId {
    let task = NewTask { idempotency: None, ttl_ms: Some(ttl_ms), ..new_task(owner, [1; 32]) };
    let (Created::New(record), Some((lease, job))) =
        store.create_running(task, "w", Duration::from_secs(30)).await.expect("create")
    else {
        panic!("created running")
    };
    store
        .finish(&lease, &job, TaskStatus::Completed, TaskOutcome::Result(result.to_owned()), false)
        .await
        .expect("finish");
    record.id
}

/// Waits (bounded) until the store's event subscriber is confirmed: only then does it keep
/// finished records.
async fn subscribed(store: &RedisStore) {
    drop(store.subscribe(&TaskId::generate(0)).await.expect("the subscriber is live"));
}

#[tokio::test]
async fn a_second_read_of_a_finished_task_makes_no_round_trip_and_a_running_one_always_does() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    warm_up_the_reader(&store).await;
    subscribed(&store).await;
    let done = finished(&store, "alice", r#"{"content":[]}"#, 60_000).await;
    let running = store
        .create(NewTask { idempotency: None, ..new_task("alice", [2; 32]) })
        .await
        .expect("create")
        .record()
        .expect("a task")
        .id
        .clone();
    let mut monitor = Monitor::start(server.port()).await;

    let first = store.get(&done, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(monitor.commands_since_last().await.len(), 1, "the first read goes to Redis");
    let second = store.get(&done, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(second, first, "the same record, outcome included");
    let control = store.get(&done, Read::Control).await.expect("get").expect("the task");
    assert_eq!((control.status, control.owner.as_str()), (TaskStatus::Completed, "alice"));
    let seen = monitor.commands_since_last().await;
    assert!(seen.is_empty(), "later reads of a finished task are answered here: {seen:#?}");
    assert_eq!(store.terminal_cache().hits, 2);

    // A full read (arguments, state) is never answered from the cache.
    store.get(&done, Read::Full).await.expect("get").expect("the task");
    assert_eq!(monitor.commands_since_last().await.len(), 1, "a full read goes to Redis");

    for _ in 0..3 {
        let read = store.get(&running, Read::WithOutcome).await.expect("get").expect("the task");
        assert_eq!(read.status, TaskStatus::Working);
        assert_eq!(monitor.commands_since_last().await.len(), 1, "every read of a running task goes to Redis");
    }
}

#[tokio::test]
async fn a_purge_on_one_replica_is_seen_by_another_within_a_bounded_wait() {
    let server = RedisServer::start();
    let opts = options(&server);
    let (a, b) = (
        RedisStore::connect(opts.clone()).await.expect("replica a"),
        RedisStore::connect(opts).await.expect("replica b"),
    );
    subscribed(&a).await;
    subscribed(&b).await;
    let id = finished(&a, "alice", r#"{"content":[]}"#, 60_000).await;
    for store in [&a, &b] {
        store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
        store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
        assert_eq!(store.terminal_cache().hits, 1, "kept on both replicas");
    }

    let all = PurgeFilter { statuses: vec![TaskStatus::Completed], older_than_ms: 0 };
    assert!(matches!(a.purge(&id, &all).await.expect("purge"), Purged::Deleted { .. }));
    assert!(a.get(&id, Read::WithOutcome).await.expect("get").is_none(), "gone at once where it was purged");
    wait_every(
        "replica b to forget the task purged on replica a",
        Duration::from_secs(5),
        Duration::from_millis(10),
        async || b.get(&id, Read::WithOutcome).await.expect("get").map_or(Look::Done(()), Look::not_yet),
    )
    .await;
    assert_eq!(b.terminal_cache().entries, 0);
}

#[tokio::test]
async fn an_entry_goes_at_the_task_expiry() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    subscribed(&store).await;
    // A short-lived task, kept by its first read. That read must come before the task expires:
    // a machine too slow for that gets a task living twice as long (the lifetime is waited
    // out below, so it starts short), never a test that depends on its speed.
    let mut ttl = Duration::from_secs(2);
    let id = loop {
        let ttl_ms = u64::try_from(ttl.as_millis()).expect("small");
        let id = finished(&store, "alice", r#"{"content":[]}"#, ttl_ms).await;
        if store.get(&id, Read::WithOutcome).await.expect("get").is_some() {
            break id;
        }
        assert!(ttl < Duration::from_secs(30), "a task living {ttl:?} expired before its first read");
        ttl *= 2;
    };
    assert_eq!(store.terminal_cache().entries, 1, "kept");
    // Redis drops the key at its expiry; the cache must not outlive it.
    let what = format!("the task living {ttl:?} to be answered no more");
    wait_every(what, ttl + Duration::from_secs(5), Duration::from_millis(50), async || {
        store.get(&id, Read::WithOutcome).await.expect("get").map_or(Look::Done(()), Look::not_yet)
    })
    .await;
    assert_eq!(store.terminal_cache().entries, 0);
}

#[tokio::test]
async fn the_cache_is_emptied_when_the_subscriber_loses_its_connection() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    subscribed(&store).await;
    let id = finished(&store, "alice", r#"{"content":[]}"#, 60_000).await;
    store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(store.terminal_cache().entries, 1);

    // Messages published while it reconnects are lost: what it kept may have been purged.
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "CLIENT", "KILL", "TYPE", "pubsub"])
        .output()
        .expect("redis-cli runs (Debian package redis-tools)");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "the subscriber's connection killed");
    let what = "the cache to drop its entries once the subscriber lost its connection";
    wait_every(what, Duration::from_secs(5), Duration::from_millis(10), async || {
        let entries = store.terminal_cache().entries;
        if entries == 0 { Look::Done(()) } else { Look::NotYet(format!("{entries} entries")) }
    })
    .await;
    // Back on a new connection, it keeps records again.
    subscribed(&store).await;
    store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(store.terminal_cache().entries, 1);
}

#[tokio::test]
async fn the_cache_stays_within_its_bounds() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    subscribed(&store).await;
    let limits = TerminalCacheLimits { entries: 100, bytes: 12_000, record_bytes: 3_000 };
    store.set_terminal_cache(limits);
    let result = format!(r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#, "x".repeat(600));
    let mut ids = Vec::new();
    for _ in 0..10 {
        let id = finished(&store, "alice", &result, 60_000).await;
        store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
        let stats = store.terminal_cache();
        assert!(stats.bytes <= limits.bytes, "{} bytes kept, over the bound of {}", stats.bytes, limits.bytes);
        ids.push(id);
    }
    let stats = store.terminal_cache();
    assert!((2..10).contains(&stats.entries), "the byte bound evicted the oldest: {stats:?}");
    // The newest is kept, the oldest went.
    let hits = stats.hits;
    store.get(ids.last().expect("ids"), Read::WithOutcome).await.expect("get");
    assert_eq!(store.terminal_cache().hits, hits + 1, "the newest is kept");
    store.get(&ids[0], Read::WithOutcome).await.expect("get");
    assert_eq!(store.terminal_cache().hits, hits + 1, "the oldest was evicted");

    // A record over the per-record bound is not kept.
    let big = format!(r#"{{"content":[{{"type":"text","text":"{}"}}]}}"#, "y".repeat(4_000));
    let id = finished(&store, "alice", &big, 60_000).await;
    let before = store.terminal_cache();
    store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
    store.get(&id, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(store.terminal_cache().hits, before.hits, "a record over record_bytes is read from Redis each time");

    // Turned off: nothing kept, nothing served.
    store.set_terminal_cache(TerminalCacheLimits { entries: 0, ..limits });
    assert_eq!(store.terminal_cache().entries, 0);
    store.get(&ids[9], Read::WithOutcome).await.expect("get");
    store.get(&ids[9], Read::WithOutcome).await.expect("get");
    assert_eq!(store.terminal_cache().hits, hits + 1);
}

/// What redis-cli prints for one command on `server`.
fn redis_cli(server: &RedisServer, args: &[&str]) -> String {
    let out = std::process::Command::new("redis-cli")
        .arg("-p")
        .arg(server.port().to_string())
        .args(args)
        .output()
        .expect("redis-cli runs (Debian package redis-tools)");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[tokio::test]
async fn a_record_found_under_another_tasks_key_is_not_kept_under_the_id_it_names() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    subscribed(&store).await;
    let a = finished(&store, "alice", r#"{"content":[]}"#, 60_000).await;
    let b = finished(&store, "alice", r#"{"content":[{"type":"text","text":"b"}]}"#, 60_000).await;
    // Someone with Redis access copies b's hash over a's key.
    let key_a = redis_cli(&server, &["KEYS", &format!("*:task:{a}")]);
    let key_b = redis_cli(&server, &["KEYS", &format!("*:task:{b}")]);
    assert!(!key_a.is_empty() && !key_b.is_empty(), "both task keys found: {key_a:?} {key_b:?}");
    assert_eq!(redis_cli(&server, &["COPY", &key_b, &key_a, "REPLACE"]), "1", "copied");
    let hits = store.terminal_cache().hits;
    // The read of a answers the record found there as what it is (b's, naming b, its result
    // bound to b): never as a's. And it does not become b's entry.
    let found = store.get(&a, Read::WithOutcome).await.expect("get").expect("the record under a's key");
    assert_eq!(found.id, b, "the record names the task it belongs to");
    assert_eq!(found.outcome, Some(TaskOutcome::Result(r#"{"content":[{"type":"text","text":"b"}]}"#.to_owned())));
    assert_eq!(store.terminal_cache().entries, 0, "a record read under another id is not kept");
    store.get(&b, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(store.terminal_cache().hits, hits, "b's first read goes to Redis");
}
