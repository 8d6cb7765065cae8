//! What `store.replicas_ack = 1` costs a task's life against 0: a real primary with one real
//! replica on loopback (the test harness's `RedisReplicated`), the Redis store driven
//! directly (no HTTP), for the two paths of a no-op task: run where created (create running,
//! finish, get) and through the queue (create, read the job, claim, finish, get). Prints, per
//! setting and path, the latency of a lifecycle run one at a time (p50, p99), the lifecycles/s
//! of 16 concurrent run-where-created loops, and per lifecycle: the commands the primary ran
//! (`INFO commandstats`, those inside scripts included), the CPU of the primary, of the
//! replica (`INFO cpu`) and of this client process (`/proc/self/stat`).
//!
//! Run: `cargo bench -p mcpgate-store --bench replicas_ack` (LIFECYCLES, default 2000; POOL,
//! the store's pool size, default 2 as `store.pool_size`). Not
//! a test: nothing is asserted (crates/store/tests/it/replicas_ack.rs asserts the commands).

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::RedisReplicated;
use mcpgate_store::{
    Claim, Created, JobQueue as _, NewTask, Read, RedisOptions, RedisStore, TaskOutcome, TaskStore as _,
};
use tokio::time::Instant;

const CONCURRENCY: usize = 16;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let lifecycles: usize = std::env::var("LIFECYCLES").ok().and_then(|n| n.parse().ok()).unwrap_or(2000);
    // store.pool_size: a WAIT holds its connection (Redis answers a connection's commands in
    // order), so the commands multiplexed behind it wait too.
    let pool_size: usize = std::env::var("POOL").ok().and_then(|n| n.parse().ok()).unwrap_or(2);
    let set = RedisReplicated::start();
    let mut probe = redis::Client::open(set.primary().url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("primary");
    let mut replica_probe = redis::Client::open(set.replica().url())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("replica");
    println!(
        "| replicas_ack | path | p50 ms | p99 ms | lifecycles/s ({CONCURRENCY} loops) | primary commands | primary CPU µs | replica CPU µs | client CPU µs |"
    );
    println!("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for ack in [0, 1] {
        let store = RedisStore::connect(RedisOptions {
            url: set.primary().url(),
            cluster: false,
            prefix: format!("bench{ack}"),
            shards: 16,
            pool_size,
            command_timeout: Duration::from_secs(2),
            at_rest: None,
            at_rest_window: Duration::ZERO,
            replicas_ack: ack,
            replicas_ack_timeout: Duration::from_millis(1000),
            tls_ca_pem: None,
            sentinel: None,
        })
        .await
        .expect("connects");
        // Warm up: connections, the job reader, scripts.
        for _ in 0..100 {
            run_here(&store).await;
            queued(&store).await;
        }
        for (path, queued_path) in [("run where created", false), ("through the queue", true)] {
            let before = Snapshot::take(&mut probe, &mut replica_probe).await;
            let mut latencies = Vec::with_capacity(lifecycles);
            for _ in 0..lifecycles {
                let started = Instant::now();
                if queued_path {
                    queued(&store).await;
                } else {
                    run_here(&store).await;
                }
                latencies.push(started.elapsed());
            }
            let after = Snapshot::take(&mut probe, &mut replica_probe).await;
            latencies.sort();
            let at = |q: f64| {
                let i = ((latencies.len() as f64 - 1.0) * q).round() as usize;
                latencies[i].as_secs_f64() * 1e3
            };
            let throughput = if queued_path { None } else { Some(concurrent(&store, lifecycles).await) };
            let per = |a: f64, b: f64| (b - a) / lifecycles as f64;
            println!(
                "| {ack} | {path} | {:.3} | {:.3} | {} | {:.1} | {:.1} | {:.1} | {:.1} |",
                at(0.5),
                at(0.99),
                throughput.map_or_else(|| "–".to_owned(), |t| format!("{t:.0}")),
                // Each snapshot's own INFO is one command.
                per(before.commands, after.commands) - 1.0 / lifecycles as f64,
                per(before.primary_cpu, after.primary_cpu) * 1e6,
                per(before.replica_cpu, after.replica_cpu) * 1e6,
                per(before.client_cpu, after.client_cpu) * 1e6,
            );
        }
    }
}

/// A no-op task created running here, finished, and read once.
async fn run_here(store: &RedisStore) {
    let (created, lease) = store.create_running(task(), "w", Duration::from_secs(30)).await.expect("create");
    let (Created::New(record), Some((lease, job))) = (created, lease) else { panic!("created running") };
    store
        .finish(&lease, &job, TaskStatus::Completed, TaskOutcome::Result("{}".to_owned()), false)
        .await
        .expect("finish");
    store.get(&record.id, Read::WithOutcome).await.expect("get").expect("the task");
}

/// A no-op task through the queue: created, its job read and claimed, finished, read once.
async fn queued(store: &RedisStore) {
    let record = store.create(task()).await.expect("create").into_record().expect("a task");
    let job = loop {
        let jobs = store.read("w", 1, Duration::from_millis(100)).await.expect("read");
        if let Some(job) = jobs.into_iter().next() {
            break job;
        }
    };
    let Claim::Run { lease, .. } = store.claim(&job, "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    store
        .finish(&lease, &job, TaskStatus::Completed, TaskOutcome::Result("{}".to_owned()), false)
        .await
        .expect("finish");
    store.get(&record.id, Read::Control).await.expect("get").expect("the task");
}

/// Lifecycles per second of `CONCURRENCY` loops running `total` run-where-created lifecycles.
async fn concurrent(store: &RedisStore, total: usize) -> f64 {
    let started = Instant::now();
    let loops: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let store = store.clone();
            tokio::spawn(async move {
                for _ in 0..total / CONCURRENCY {
                    run_here(&store).await;
                }
            })
        })
        .collect();
    for l in loops {
        l.await.expect("loop");
    }
    (total / CONCURRENCY * CONCURRENCY) as f64 / started.elapsed().as_secs_f64()
}

fn task() -> NewTask {
    NewTask {
        owner: "bench".to_owned(),
        issuer: String::new(),
        subject: "bench".to_owned(),
        era: mcpgate_protocol::Era::Modern,
        tool: "noop".to_owned(),
        arguments: "{}".to_owned(),
        capabilities: "{}".to_owned(),
        ttl_ms: Some(60_000),
        poll_interval_ms: 100,
        scopes: Vec::new(),
        idempotency: None,
        index_horizon_ms: None,
        indexed: false,
        quota: None,
        input_responses: mcpgate_store::RawAnswers::new(),
        state: None,
        credential: None,
        trace: None,
        server: None,
    }
}

/// Counters read before and after a run.
struct Snapshot {
    commands: f64,
    primary_cpu: f64,
    replica_cpu: f64,
    client_cpu: f64,
}

impl Snapshot {
    async fn take(
        primary: &mut redis::aio::MultiplexedConnection,
        replica: &mut redis::aio::MultiplexedConnection,
    ) -> Self {
        let info: String =
            redis::cmd("INFO").arg("cpu").arg("commandstats").query_async(primary).await.expect("primary INFO");
        let replica_info: String = redis::cmd("INFO").arg("cpu").query_async(replica).await.expect("replica INFO");
        let commands = info
            .lines()
            .filter(|l| l.starts_with("cmdstat_"))
            .filter_map(|l| l.split("calls=").nth(1)?.split(',').next()?.parse::<f64>().ok())
            .sum();
        Self { commands, primary_cpu: cpu(&info), replica_cpu: cpu(&replica_info), client_cpu: client_cpu() }
    }
}

/// `used_cpu_sys` + `used_cpu_user` of an `INFO cpu` reply, in seconds.
fn cpu(info: &str) -> f64 {
    info.lines()
        .filter(|l| l.starts_with("used_cpu_sys:") || l.starts_with("used_cpu_user:"))
        .filter_map(|l| l.split_once(':')?.1.trim().parse::<f64>().ok())
        .sum()
}

/// This process's user + system CPU, in seconds (`/proc/self/stat`, 100 ticks a second).
fn client_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which may hold spaces) start at the state, field 3.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = [11, 12].iter().filter_map(|i| fields.get(*i)?.parse::<f64>().ok()).sum();
    ticks / 100.0
}
