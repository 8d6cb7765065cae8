//! Losing a Redis node under load: nginx in front of three replicas, the load generator driving
//! mixed traffic (sync calls, task lifecycles in both eras, tasks waiting for input,
//! cancellations, and a non-idempotent upstream tool run as a task that counts its runs), and
//! the Redis primary `kill -9`ed mid-load, 300 ms after its replication links were cut (its
//! last writes reach no replica, as when the network fails just before the node does) —
//! behind Sentinel (the sentinels promote a replica) and in a Redis Cluster with a replica per
//! primary (the cluster promotes it). With `store.replicas_ack = 1` no task a client was told
//! exists is lost, none is stuck, none runs twice, and the fleet serves again within a bound.
//!
//! `MCPGATE_E2E_REPLICAS_ACK=0` (what `scripts/bench-failover` sets) runs the same faults with
//! asynchronous replication and reports what was lost instead of asserting that nothing was.
//!
//! These tests are heavy, so they take turns (one at a time).

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use mcpgate_e2e::{
    COUNTED_RUNS, Client, Cluster, ClusterBuilder, HttpServer, Load, LoadReport, PATIENCE, counted_runs_config,
    wait_for,
};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long the fleet may take to serve again after the primary died: Sentinel's
/// `down-after-milliseconds` (1 s in the harness) or the cluster's node timeout (2 s), its
/// election, and the replicas' reconnect, with a wide margin for a loaded 2-core box.
const SERVING_AGAIN_WITHIN: Duration = Duration::from_secs(30);

/// The Redis topology under test.
#[derive(Debug, Clone, Copy)]
enum Topology {
    /// A primary, two replicas and three sentinels.
    Sentinel,
    /// Three primaries with a replica each.
    Cluster,
}

/// `store.replicas_ack` for the run: 1 unless the environment asks for the benchmark's 0.
fn replicas_ack() -> u32 {
    std::env::var("MCPGATE_E2E_REPLICAS_ACK").ok().and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// Three replicas on `topology`, serving the built-in toolsets and the counted-runs FastMCP
/// server as upstream `c` (its `count_run` a task when the client declares tasks).
fn fleet(topology: Topology, dir: &Path, counted: &HttpServer, ack: u32) -> anyhow::Result<Cluster> {
    let config = counted_runs_config(dir, counted)?;
    let builder: ClusterBuilder = Cluster::builder(3)
        .args(&["--config", &config.to_string_lossy()])
        // A lease long enough that a claim caught by the failover is retried under its claim id
        // until the new primary confirms it (a third of the lease), short enough that a run
        // whose claim never reached a replica is taken over within the test.
        .env("MCPGATE_TASKS_LEASE_MS", "15000")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "1000")
        .env("MCPGATE_STORE_REPLICAS_ACK", &ack.to_string())
        .env("MCPGATE_STORE_REPLICAS_ACK_TIMEOUT_MS", "500");
    match topology {
        Topology::Sentinel => builder.redis_sentinel(),
        Topology::Cluster => builder.redis_cluster_with_replicas(3),
    }
    .start()
}

/// Creates a task through the load balancer (one try): one of 0.2 s, past the gateway's
/// answer window, so the reply is the task (durably created) rather than its result.
async fn create_task(client: &Client, url: &str) -> anyhow::Result<String> {
    let params = json!({
        "name": "slow_compute",
        "arguments": {"seconds": 0.2, "label": "probe"},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    });
    let created: Value = client.modern(url, "tools/call", params).await?.json()?;
    created["result"]["taskId"].as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no task: {created}"))
}

/// How long the primary keeps acknowledging writes its replicas do not get before it dies.
const REPLICATION_CUT: Duration = Duration::from_millis(300);

/// `redis-cli -p port args...`'s output.
fn redis_cli(port: u16, args: &[&str]) -> String {
    let output = std::process::Command::new("redis-cli")
        .arg("-p")
        .arg(port.to_string())
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("redis-cli runs (Debian: redis-tools, installed with redis-server)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Cuts the replication links of the primary on `port` for [`REPLICATION_CUT`], as when the
/// network between it and its replicas fails just before the primary does: its replicas are
/// given a wrong `masterauth` (so they cannot reconnect) and their links are closed. A write
/// answered in that window is what asynchronous replication loses; with `replicas_ack` its
/// `WAIT` cannot be satisfied. Returns the replicas' ports, for [`heal_replication`].
fn cut_replication(port: u16) -> Vec<u16> {
    let info = redis_cli(port, &["INFO", "replication"]);
    let replicas: Vec<u16> = info
        .lines()
        .filter(|l| l.starts_with("slave"))
        .filter_map(|l| l.split(',').find_map(|f| f.strip_prefix("port="))?.parse().ok())
        .collect();
    assert!(!replicas.is_empty(), "the primary on {port} has no replica: {info}");
    for replica in &replicas {
        assert_eq!(redis_cli(*replica, &["CONFIG", "SET", "masterauth", "cut-by-the-test"]).trim(), "OK");
    }
    redis_cli(port, &["CLIENT", "KILL", "TYPE", "replica"]);
    std::thread::sleep(REPLICATION_CUT);
    replicas
}

/// Lets the replicas cut by [`cut_replication`] connect to a primary again.
fn heal_replication(replicas: &[u16]) {
    for replica in replicas {
        assert_eq!(redis_cli(*replica, &["CONFIG", "SET", "masterauth", ""]).trim(), "OK");
    }
}

/// Cuts the primary's replication, kills it (the load writes to it, and is seen still running
/// right after), and returns how long until a replica was promoted and until the fleet
/// created a task again.
async fn kill_the_primary(
    cluster: &mut Cluster,
    topology: Topology,
    client: &Client,
    load: &mut Load,
) -> anyhow::Result<(Duration, Duration)> {
    let killed = Instant::now();
    let mut in_flight = |when: &str| -> anyhow::Result<()> {
        anyhow::ensure!(load.running()?, "the load had ended {when}: the fault met no load");
        Ok(())
    };
    let promoted = tokio::task::block_in_place(|| -> anyhow::Result<Duration> {
        Ok(match topology {
            Topology::Sentinel => {
                let set = cluster.redis_sentinel().expect("a Sentinel set");
                let cut = cut_replication(set.primary_port());
                set.kill_primary();
                in_flight("when the primary was killed")?;
                heal_replication(&cut);
                set.wait_for_new_primary(SERVING_AGAIN_WITHIN);
                killed.elapsed()
            }
            Topology::Cluster => {
                let redis = cluster.redis_cluster_mut().expect("a Redis Cluster");
                redis.wait_for_replicas(SERVING_AGAIN_WITHIN);
                let victim = redis.primary_of_slot(0).expect("a primary serves slot 0");
                let cut = cut_replication(redis.nodes()[victim].port());
                redis.kill_node(victim);
                in_flight("when the primary was killed")?;
                heal_replication(&cut);
                redis.wait_for_new_primary(0, victim, SERVING_AGAIN_WITHIN);
                let promoted = killed.elapsed();
                // The dead node comes back (as an orchestrator would restart it) and rejoins as
                // the replica of the one promoted in its place: with replicas_ack = 1 a shard's
                // writes need a live replica.
                redis.restart_node(victim);
                promoted
            }
        })
    })?;
    let url = cluster.url();
    wait_for(format!("the fleet to serve again (within {SERVING_AGAIN_WITHIN:?})"), SERVING_AGAIN_WITHIN, async || {
        Ok(create_task(client, &url).await.is_ok())
    })
    .await;
    Ok((promoted, killed.elapsed()))
}

/// Tasks the fleet's replicas counted as created so far (`mcpgate_tasks_total`).
async fn tasks_created(cluster: &Cluster, client: &Client) -> anyhow::Result<u64> {
    let mut total = 0;
    for i in 0..3 {
        let (_, text) = client.get(&format!("http://{}/metrics", cluster.replica(i).addr())).await?;
        total += text
            .lines()
            .filter(|l| l.starts_with("mcpgate_tasks_total{") && l.contains("event=\"created\""))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .map(|v| v as u64)
            .sum::<u64>();
    }
    Ok(total)
}

/// One run: load, the primary killed after a few seconds, the load's report.
async fn failover_under_load(topology: Topology) -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let ack = replicas_ack();
    let dir = tempfile::tempdir()?;
    let counted = HttpServer::fastmcp_script("counted_runs_server.py", dir.path())?;
    let mut cluster = fleet(topology, dir.path(), &counted, ack)?;
    let client = Client::new()?;
    let mut args = vec![
        "--clients",
        "8",
        "--duration",
        "14",
        "--poll-ms",
        "50",
        "--task-seconds",
        "0.2",
        "--task-deadline",
        "90",
        "--mix",
        "sync=25,task=25,legacy_task=15,task_input=20,cancel=15",
    ];
    args.extend(COUNTED_RUNS);
    let mut load = Load::start(&cluster.url(), &args)?;
    // The fault comes once the load is under way (its tasks created on the fleet), and while it
    // still runs (checked right after the kill).
    wait_for("the load to create tasks", PATIENCE, async || Ok(tasks_created(&cluster, &client).await? >= 20)).await;
    let (promoted, serving) = kill_the_primary(&mut cluster, topology, &client, &mut load).await?;
    let LoadReport { code, report } = load.finish_with_code(Duration::from_secs(180)).await?;
    let tasks = &report["tasks"];
    println!(
        "failover ({topology:?}, replicas_ack = {ack}): replica promoted after {promoted:?}, fleet serving after \
         {serving:?}; tasks created {}, ended {}, acknowledged then missing {}, stuck {}, run twice {}",
        tasks["created"], tasks["ended"], tasks["acknowledged_missing"], tasks["stuck"], tasks["double_runs"]
    );
    assert!(tasks["created"].as_u64().unwrap_or(0) > 0, "the load created tasks: {report:#}");
    assert!(report["runs"]["keys"].as_u64().unwrap_or(0) > 0, "counted tasks ran: {report:#}");
    assert!(report["runs"]["error"].is_null(), "the run ledger was read: {report:#}");
    if ack == 0 {
        // Measured, not asserted: asynchronous replication may lose what the primary
        // acknowledged just before it died.
        return Ok(());
    }
    for counter in ["acknowledged_missing", "stuck", "duplicated", "double_runs"] {
        assert_eq!(tasks[counter], 0, "{counter}: {report:#}");
    }
    // Every task the load was told exists ended, or failed visibly: a run cut by the fault
    // whose tool is not retry-safe fails as interrupted rather than run again. Nothing else
    // failed but requests the outage refused (retried), never with a wrong answer.
    let mut failed_visibly = 0;
    for (kind, count) in report["failures"].as_object().into_iter().flatten() {
        let example = report["failure_examples"][kind].as_str().unwrap_or_default();
        match kind.as_str() {
            "transport" | "http_502" | "http_503" | "http_504" => {}
            "task_failed" => failed_visibly = count.as_u64().unwrap_or(0),
            _ => panic!("{kind}: {count} ({example}): {report:#}"),
        }
    }
    // Each task that failed, by its own error: every one because the fault interrupted its run.
    let mut interrupted = 0;
    for (message, count) in report["task_failures"].as_object().into_iter().flatten() {
        assert!(message.starts_with("Task interrupted"), "{count} tasks failed otherwise: {message}: {report:#}");
        interrupted += count.as_u64().unwrap_or(0);
    }
    assert_eq!(interrupted, failed_visibly, "every failed task is accounted for by its error: {report:#}");
    let (created, ended) = (tasks["created"].as_u64().unwrap_or(0), tasks["ended"].as_u64().unwrap_or(0));
    // A task that failed visibly ended: every acknowledged task is terminal.
    assert_eq!(created, ended, "every created task ended ({failed_visibly} failed visibly): {report:#}");
    assert_eq!(report["failures"]["wrong"].as_u64().unwrap_or(0), 0, "no wrong answer: {report:#}");
    assert_eq!(report["integrity_failures"], 0, "nothing lost, duplicated or wrong: {report:#}");
    assert_eq!(code, Some(0), "{report:#}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_under_load_loses_no_acknowledged_task() -> anyhow::Result<()> {
    failover_under_load(Topology::Sentinel).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_failover_under_load_loses_no_acknowledged_task() -> anyhow::Result<()> {
    failover_under_load(Topology::Cluster).await
}
