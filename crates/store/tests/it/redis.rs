//! The conformance suite and Redis-specific properties against a real `redis-server`.

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::testing::{RedisServer, run_fleet_suite, run_pins_suite, run_suite};
use mcpgate_store::{RedisOptions, RedisStore};

pub(crate) fn options(server: &RedisServer) -> RedisOptions {
    RedisOptions {
        url: server.url(),
        sentinel: None,
        cluster: false,
        prefix: format!("t{}", rand_suffix()),
        shards: 4,
        pool_size: 4,
        command_timeout: Duration::from_secs(2),
        // The suite runs with payloads sealed at rest, as deployments do by default, and
        // past the migration window: every payload the store writes must be sealed.
        at_rest: Some(at_rest(true)),
        at_rest_window: Duration::ZERO,
        replicas_ack: 0,
        replicas_ack_timeout: Duration::ZERO,
        tls_ca_pem: None,
    }
}

/// Sealing of payloads at rest with a fixed test key; `write` = seal what is written.
pub(crate) fn at_rest(write: bool) -> std::sync::Arc<mcpgate_seal::AtRest> {
    let ring = mcpgate_seal::KeyRing::parse(&["k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]).expect("key");
    std::sync::Arc::new(mcpgate_seal::AtRest::new(&mcpgate_seal::Sealer::new(ring, 1024), write))
}

/// A task to create: `owner`'s call with this idempotency digest (its first byte picks the
/// shard), a minute to live, no idempotency window unless a test sets one.
pub(crate) fn new_task(owner: &str, idempotency: [u8; 32]) -> mcpgate_store::NewTask {
    mcpgate_store::NewTask {
        owner: owner.to_owned(),
        issuer: String::new(),
        subject: owner.to_owned(),
        era: mcpgate_protocol::Era::Modern,
        tool: "t".to_owned(),
        arguments: "{}".to_owned(),
        capabilities: "{}".to_owned(),
        ttl_ms: Some(60_000),
        poll_interval_ms: 100,
        scopes: Vec::new(),
        idempotency: Some(mcpgate_store::Idempotency { scope: idempotency, call: [0; 32], window_ms: 0 }),
        index_horizon_ms: None,
        indexed: true,
        quota: None,
        input_responses: mcpgate_store::RawAnswers::new(),
        state: None,
        credential: None,
        trace: None,
        server: None,
    }
}

/// A store on the Redis Cluster at `urls`, under a prefix of its own.
fn cluster_options(urls: &str, at_rest: Option<std::sync::Arc<mcpgate_seal::AtRest>>) -> RedisOptions {
    RedisOptions {
        url: urls.to_owned(),
        sentinel: None,
        cluster: true,
        prefix: format!("c{}", rand_suffix()),
        shards: 8,
        pool_size: 4,
        command_timeout: Duration::from_secs(2),
        at_rest,
        at_rest_window: Duration::ZERO,
        replicas_ack: 0,
        replicas_ack_timeout: Duration::ZERO,
        tls_ca_pem: None,
    }
}

fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

#[tokio::test]
async fn redis_store_honours_the_contract() {
    let server = RedisServer::start();
    run_suite(|| async { RedisStore::connect(options(&server)).await.expect("connects") }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_keeps_pins() {
    let server = RedisServer::start();
    run_pins_suite(|| async { RedisStore::connect(options(&server)).await.expect("connects") }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_store_keeps_heartbeats() {
    let server = RedisServer::start();
    run_fleet_suite(|| async { RedisStore::connect(options(&server)).await.expect("connects") }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_store_keeps_heartbeats_in_one_slot() {
    let cluster = mcpgate_store::testing::RedisCluster::start(3);
    let urls = cluster.urls();
    run_fleet_suite(|| async {
        RedisStore::connect(cluster_options(&urls, None)).await.expect("connects to the cluster")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_store_keeps_pins_in_one_slot_per_upstream() {
    let cluster = mcpgate_store::testing::RedisCluster::start(3);
    let urls = cluster.urls();
    run_pins_suite(|| async {
        RedisStore::connect(cluster_options(&urls, None)).await.expect("connects to the cluster")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_store_honours_the_contract() {
    use mcpgate_store::testing::RedisCluster;
    let cluster = RedisCluster::start(3);
    let urls = cluster.urls();
    run_suite(|| async {
        RedisStore::connect(cluster_options(&urls, Some(at_rest(true)))).await.expect("connects to the cluster")
    })
    .await;
}

#[tokio::test]
async fn replicas_sharing_a_prefix_all_connect() {
    let server = RedisServer::start();
    let opts = options(&server);
    // The first connect creates the consumer groups; later ones find them and must still succeed.
    RedisStore::connect(opts.clone()).await.expect("first replica connects");
    RedisStore::connect(opts.clone()).await.expect("second replica connects");
    RedisStore::connect(opts).await.expect("third replica connects");
}

/// Counts the commands clients send, and those run inside scripts, between markers, with
/// `MONITOR` on its own connection.
pub(crate) struct Monitor {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::net::TcpStream>>,
    marker: tokio::net::TcpStream,
    n: u32,
}

impl Monitor {
    pub(crate) async fn start(port: u16) -> Self {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        stream.write_all(b"MONITOR\r\n").await.expect("monitor");
        let mut lines = tokio::io::BufReader::new(stream).lines();
        let ok = lines.next_line().await.expect("reply").expect("line");
        assert_eq!(ok, "+OK");
        let marker = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let mut monitor = Self { lines, marker, n: 0 };
        monitor.commands_since_last().await;
        monitor
    }

    /// The client commands seen since the previous call.
    pub(crate) async fn commands_since_last(&mut self) -> Vec<String> {
        self.seen_since_last().await.0
    }

    /// The client commands and the commands scripts ran, seen since the previous call.
    async fn seen_since_last(&mut self) -> (Vec<String>, Vec<String>) {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        self.n += 1;
        let marker = format!("round-trip-marker-{}", self.n);
        self.marker.write_all(format!("ECHO {marker}\r\n").as_bytes()).await.expect("echo");
        let mut buf = [0u8; 64];
        let _ = self.marker.read(&mut buf).await.expect("echo reply");
        let (mut sent, mut in_scripts) = (Vec::new(), Vec::new());
        loop {
            let line = tokio::time::timeout(Duration::from_secs(5), self.lines.next_line())
                .await
                .expect("monitor output in time")
                .expect("read")
                .expect("line");
            if line.contains(&marker) {
                return (sent, in_scripts);
            }
            if line.contains("[0 lua]") {
                in_scripts.push(line);
            } else {
                sent.push(line);
            }
        }
    }
}

/// Opens the job reader's own connection (once per replica, with its `CLIENT ID`), so the
/// counts below are those of each operation, not of connection set-up.
pub(crate) async fn warm_up_the_reader(store: &RedisStore) {
    use mcpgate_store::JobQueue as _;
    let jobs = store.read("w", 1, Duration::from_millis(10)).await.expect("read");
    assert!(jobs.is_empty(), "no job yet: {jobs:?}");
}

#[tokio::test]
async fn every_operation_is_one_round_trip() {
    use mcpgate_protocol::task::TaskStatus;
    use mcpgate_store::{Claim, JobQueue as _, NewTask, TaskOutcome, TaskStore as _};

    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    warm_up_the_reader(&store).await;
    let mut monitor = Monitor::start(server.port()).await;
    let scoped = |scope: [u8; 32]| Some(mcpgate_store::Idempotency { scope, call: [0; 32], window_ms: 60_000 });
    let task = NewTask { idempotency: scoped([3; 32]), ..new_task("rt", [3; 32]) };
    let mut count = async |what: &str| {
        let seen = monitor.commands_since_last().await;
        assert_eq!(seen.len(), 1, "{what} took {} round trips: {seen:#?}", seen.len());
        seen.into_iter().next().expect("one")
    };

    let record = store.create(task.clone()).await.expect("create").record().expect("a task").clone();
    assert!(count("create").await.to_ascii_lowercase().contains("evalsha"));
    store.get(&record.id, mcpgate_store::Read::WithOutcome).await.expect("get");
    let get = count("get").await.to_ascii_lowercase();
    assert!(get.contains("hmget") && !get.contains("\"args\""), "a poll reads no payload: {get}");

    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    count("read").await;
    let Claim::Run { lease, .. } = store.claim(&jobs[0], "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    count("claim").await;
    store
        .renew(&lease, Duration::from_secs(30), Some(&mcpgate_store::StatusNote::text("progress")))
        .await
        .expect("renew");
    count("renew").await;
    store
        .finish(&lease, &jobs[0], TaskStatus::Completed, TaskOutcome::Result("{}".to_owned()), false)
        .await
        .expect("finish");
    assert!(count("finish (with the job acknowledgement)").await.to_ascii_lowercase().contains("evalsha"));

    let other = store
        .create(NewTask { idempotency: scoped([4; 32]), ..task.clone() })
        .await
        .expect("create")
        .record()
        .expect("a task")
        .clone();
    count("create").await;
    store.cancel(&other.id, "rt").await.expect("cancel");
    count("cancel").await;

    let asking = store
        .create(NewTask { idempotency: scoped([5; 32]), ..task })
        .await
        .expect("create")
        .record()
        .expect("a task")
        .clone();
    count("create").await;
    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    count("read").await;
    let job = jobs.iter().find(|j| j.task == asking.id).expect("the job");
    let Claim::Run { lease, .. } = store.claim(job, "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    count("claim").await;
    let ask =
        mcpgate_store::RawAnswer { method: "roots/list".to_owned(), json: r#"{"method":"roots/list"}"#.to_owned() };
    let requests: mcpgate_store::RawRequests = [("a".to_owned(), ask.clone()), ("b".to_owned(), ask)].into();
    store.park(&lease, job, &requests, Some("{}")).await.expect("park");
    count("park").await;
    let roots = mcpgate_store::CheckedAnswer { fits: vec!["roots/list"], json: r#"{"roots":[]}"#.to_owned() };
    let answers: mcpgate_store::CheckedAnswers = [("a".to_owned(), roots.clone()), ("b".to_owned(), roots)].into();
    assert_eq!(
        store.answer(&asking.id, "rt", &answers, 1 << 20).await.expect("answer"),
        mcpgate_store::Answered::Resumed
    );
    count("answer (with the re-enqueue)").await;
}

/// What one no-op task's life costs Redis, operation by operation, as the gateway drives it
/// (2026-07-28, no idempotency key): the commands clients send and those scripts run, all of
/// which Redis executes and `INFO commandstats` counts, for the two paths of a task: run where
/// created (a free slot on the creating replica; no owner index, as where tasks/list is not
/// served) and through the queue (no free slot; owner index kept). A change that adds a
/// command to the task path fails here; one that removes some updates the table.
#[tokio::test]
async fn commands_per_operation_of_a_no_op_lifecycle() {
    use mcpgate_protocol::task::TaskStatus;
    use mcpgate_store::{Claim, Created, EventBus as _, JobQueue as _, NewTask, Read, TaskOutcome, TaskStore as _};

    let server = RedisServer::start();
    let opts = options(&server);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    warm_up_the_reader(&store).await;
    let mut monitor = Monitor::start(server.port()).await;
    let mut costs: Vec<(&str, usize, usize)> = Vec::new();
    let mut cost = async |what: &'static str, monitor: &mut Monitor| {
        let (sent, in_scripts) = monitor.seen_since_last().await;
        costs.push((what, sent.len(), in_scripts.len()));
    };
    let done = TaskOutcome::Result("{}".to_owned());

    // Run where created.
    let task = NewTask { idempotency: None, indexed: false, ..new_task("cmds", [6; 32]) };
    let (Created::New(record), Some((lease, job))) =
        store.create_running(task, "w", Duration::from_secs(30)).await.expect("create")
    else {
        panic!("created running")
    };
    cost("create, run here", &mut monitor).await;
    let events = store.subscribe(&record.id).await.expect("subscribe");
    cost("watch for cancellation", &mut monitor).await;
    store.finish(&lease, &job, TaskStatus::Completed, done.clone(), false).await.expect("finish");
    cost("finish", &mut monitor).await;
    let read = store.get(&record.id, Read::WithOutcome).await.expect("get").expect("the task");
    assert_eq!(read.status, TaskStatus::Completed);
    cost("get with the result", &mut monitor).await;
    drop(events);

    // Through the queue.
    let task = NewTask { idempotency: None, index_horizon_ms: Some(86_400_000), ..new_task("cmds", [6; 32]) };
    let record = store.create(task).await.expect("create").record().expect("a task").clone();
    cost("create, queued, indexed", &mut monitor).await;
    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    cost("read the job", &mut monitor).await;
    let Claim::Run { lease, .. } = store.claim(&jobs[0], "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    cost("claim", &mut monitor).await;
    store.finish(&lease, &jobs[0], TaskStatus::Completed, done, false).await.expect("finish");
    cost("finish", &mut monitor).await;
    let read = store.get(&record.id, Read::Control).await.expect("get").expect("the task");
    assert_eq!(read.status, TaskStatus::Completed);
    cost("get", &mut monitor).await;

    // Nothing is left behind in the lease index or the stream.
    let mut conn = redis::Client::open(server.url()).expect("url").get_multiplexed_async_connection().await.expect("c");
    let prefix = &opts.prefix;
    for shard in 0..opts.shards {
        let key = format!("{prefix}:{{{prefix}:{shard:02x}}}:leases");
        let (leases, jobs): (u64, u64) = redis::pipe()
            .cmd("ZCARD")
            .arg(&key)
            .cmd("XLEN")
            .arg(format!("{prefix}:{{{prefix}:{shard:02x}}}:jobs"))
            .query_async(&mut conn)
            .await
            .expect("counts");
        assert_eq!((leases, jobs), (0, 0), "a settled task leaves no lease entry or job behind ({key})");
    }

    let table: Vec<String> = costs.iter().map(|(what, sent, inner)| format!("{what}: {sent} + {inner}")).collect();
    // Before the lean-path redesign (issue 14), through the queue with the owner index:
    // create 1 + 9, read 1 + 0, claim 1 + 5, watch 1 + 0 (SUBSCRIBE, and an UNSUBSCRIBE when it
    // ends), finish 1 + 6, get 1 + 0.
    let expected = [
        ("create, run here", 1, 5),
        ("watch for cancellation", 0, 0),
        ("finish", 1, 5),
        ("get with the result", 1, 0),
        ("create, queued, indexed", 1, 9),
        ("read the job", 1, 0),
        ("claim", 1, 5),
        ("finish", 1, 6),
        ("get", 1, 0),
    ];
    assert_eq!(costs, expected, "{table:#?}");
}

#[tokio::test]
async fn the_store_recovers_when_redis_restarts() {
    use mcpgate_protocol::task::TaskStatus;
    use mcpgate_store::{EventBus as _, JobQueue as _, NewTask, TaskEvent, TaskId, TaskStore as _};

    let mut server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    let watched = TaskId::generate(1);
    let mut subscription = store.subscribe(&watched).await.expect("subscribe");

    server.stop();
    assert!(store.ping().await.is_err(), "an outage is reported, not hidden");
    server.restart();

    // The subscriber reconnects on its own and tells its waiters to re-read.
    let event = tokio::time::timeout(Duration::from_secs(10), subscription.next()).await.expect("resync in time");
    assert_eq!(event, TaskEvent::Resync);
    store.publish(&watched, TaskEvent::Status(TaskStatus::Completed)).await.expect("publish after reconnect");
    let event = tokio::time::timeout(Duration::from_secs(5), subscription.next()).await.expect("event in time");
    assert_eq!(event, TaskEvent::Status(TaskStatus::Completed));

    // Redis came back empty: consumer groups and scripts are recreated on demand.
    let created = wait_every("the store to recover", Duration::from_secs(10), Duration::from_millis(100), async || {
        let task = NewTask { era: mcpgate_protocol::Era::Legacy, ..new_task("o", [9; 32]) };
        store.create(task).await.map_or_else(|e| Look::NotYet(e.to_string()), Look::Done)
    })
    .await;
    // Each read blocks up to 200 ms itself.
    wait_every("the queue to recover", Duration::from_secs(10), Duration::ZERO, async || {
        let jobs = store.read("w", 10, Duration::from_millis(200)).await;
        match jobs {
            Ok(jobs) if jobs.iter().any(|j| j.task == created.record().expect("a task").id) => Look::Done(()),
            other => Look::not_yet(other),
        }
    })
    .await;
}

#[tokio::test]
async fn owner_indexes_drop_expired_tasks() {
    use mcpgate_store::{NewTask, TaskStore as _};

    let server = RedisServer::start();
    let opts = options(&server);
    let prefix = opts.prefix.clone();
    let store = RedisStore::connect(opts).await.expect("connects");
    let task = |call: u8, ttl_ms: u64, horizon: Option<u64>| NewTask {
        ttl_ms: Some(ttl_ms),
        index_horizon_ms: horizon,
        // One shard (the first byte picks it), so one owner index holds every entry.
        ..new_task(
            "indexed",
            [0, call, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
        )
    };
    let client = redis::Client::open(server.url()).expect("client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connection");
    let index_size = async |conn: &mut redis::aio::MultiplexedConnection| -> usize {
        let keys: Vec<String> =
            redis::cmd("KEYS").arg(format!("{prefix}:*:owner:*")).query_async(&mut *conn).await.expect("keys");
        assert!(keys.len() <= 1, "one shard, one index: {keys:?}");
        match keys.first() {
            Some(key) => redis::cmd("ZCARD").arg(key).query_async(&mut *conn).await.expect("zcard"),
            None => 0,
        }
    };

    // Entries older than the horizon go when the owner creates again.
    store.create(task(1, 200, Some(300))).await.expect("create");
    store.create(task(2, 200, Some(300))).await.expect("create");
    assert_eq!(index_size(&mut conn).await, 2);
    tokio::time::sleep(Duration::from_millis(400)).await;
    store.create(task(3, 60_000, Some(300))).await.expect("create");
    assert_eq!(index_size(&mut conn).await, 1, "expired entries pruned on create");

    // Without a horizon (unlimited lifetimes allowed), listing drops entries of expired tasks.
    store.create(task(4, 200, None)).await.expect("create");
    assert_eq!(index_size(&mut conn).await, 2);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let page = store.list("indexed", None, 10).await.expect("list");
    assert_eq!(page.tasks.len(), 1);
    assert_eq!(index_size(&mut conn).await, 1, "expired entries pruned on list");
}

#[tokio::test]
async fn workers_long_gone_are_forgotten() {
    use mcpgate_store::{JobQueue as _, TaskStore as _};

    let server = RedisServer::start();
    let mut opts = options(&server);
    opts.shards = 1;
    let store = RedisStore::connect(opts).await.expect("connects");
    // "holder" takes a job and keeps it; "idler" took one and is done with it.
    let task = |call: u8| new_task("o", [call; 32]);
    store.create(task(1)).await.expect("create");
    store.create(task(2)).await.expect("create");
    let held = store.read("holder", 1, Duration::from_millis(100)).await.expect("read");
    assert_eq!(held.len(), 1);
    let done = store.read("idler", 1, Duration::from_millis(100)).await.expect("read");
    store.ack(&done[0]).await.expect("ack");
    assert_eq!(store.forget_idle_workers(Duration::from_secs(60)).await.expect("forget"), 0, "none idle long");
    // Idle is measured on Redis's clock: let it pass. The threshold is long enough that a slow
    // machine does not make the worker that just read look idle too.
    let idle = Duration::from_secs(1);
    tokio::time::sleep(idle + Duration::from_millis(200)).await;
    store.read("active", 10, Duration::from_millis(10)).await.expect("read");
    assert_eq!(store.forget_idle_workers(idle).await.expect("forget"), 1, "only the idler");
    // The holder's job is still pending (idle for longer than the reclaim asks), so it can
    // still be reclaimed.
    let reclaimed = store.reclaim("rescuer", Duration::from_millis(200), 10).await.expect("reclaim");
    assert_eq!(reclaimed.len(), 1);
}

#[tokio::test]
async fn a_change_published_by_one_replica_reaches_another() {
    use mcpgate_store::{Change, EventBus as _};
    let server = RedisServer::start();
    let opts = options(&server);
    let a = RedisStore::connect(opts.clone()).await.expect("replica a");
    let b = RedisStore::connect(opts).await.expect("replica b");
    let mut on_b = b.changes();
    // b's subscriber connects in the background: publish until it hears one (each look waits
    // up to 200 ms for it).
    wait_every("replica b to hear replica a's change", Duration::from_secs(5), Duration::ZERO, async || {
        a.publish_change(&Change::PromptsListChanged).await.expect("publish");
        match tokio::time::timeout(Duration::from_millis(200), on_b.recv()).await {
            Ok(Ok(Change::PromptsListChanged)) => Look::Done(()),
            Ok(Ok(Change::Missed)) => Look::NotYet("a missed change".to_owned()),
            Err(_) => Look::NotYet("nothing within 200 ms".to_owned()),
            Ok(other) => panic!("unexpected {other:?}"),
        }
    })
    .await;
}
