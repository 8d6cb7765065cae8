//! Faults under load (Redis + replicas + nginx, driven by `mcpgate-loadgen`): replicas killed
//! and restarted, Redis restarted, a rolling restart that rotates the sealing keys while
//! multi-round calls are mid-way, and thousands of parked legacy waiters on slow clients.
//! Every created task must end, no result may be lost, duplicated or wrong.
//!
//! These tests are heavy, so they take turns (one at a time).

use std::time::Duration;

use anyhow::Context as _;
use serde_json::{Value, json};

use mcpgate_e2e::{
    CLUSTER_SEAL_KEYS, Client, Cluster, ClusterBuilder, Load, Look, PATIENCE, Until, poll_task, wait_for,
};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn cluster(replicas: usize) -> ClusterBuilder {
    Cluster::builder(replicas)
        .env("MCPGATE_TOOLSET", "conformance,demo")
        // Short leases, so a killed replica's tasks are taken over within the test.
        .env("MCPGATE_TASKS_LEASE_MS", "2000")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "500")
}

/// Every created task ended, and nothing was lost, duplicated or wrong.
fn assert_nothing_lost(report: &Value) {
    assert_eq!(report["integrity_failures"], 0, "{report:#}");
    assert_eq!(report["tasks"]["lost"], 0, "{report:#}");
    assert_eq!(report["tasks"]["duplicated"], 0, "{report:#}");
    assert_eq!(report["tasks"]["created"], report["tasks"]["ended"], "every created task ended: {report:#}");
    assert!(report["flows_ok"].as_u64().unwrap_or(0) > 0, "the load ran: {report:#}");
}

/// Waits until the load reaches the fleet (the replicas answered 50 tool calls between them),
/// so the fault that follows lands on work in flight.
async fn load_running(client: &Client, cluster: &Cluster) {
    wait_for("the load to reach the replicas (50 tools/call answered)", PATIENCE, async || {
        let mut calls = 0.0;
        for replica in cluster.replicas.iter().flatten() {
            let (_, text) = client.get(&format!("http://{}/metrics", replica.addr())).await?;
            calls += text
                .lines()
                .filter(|l| l.starts_with("mcpgate_requests_total{method=\"tools/call\""))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>();
        }
        Ok(if calls >= 50.0 { Look::Done(()) } else { Look::not_yet(calls) })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_killed_under_load_lose_no_task() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut cluster = cluster(3).start()?;
    let load = Load::start(
        &cluster.url(),
        &[
            "--clients",
            "12",
            "--duration",
            "16",
            "--poll-ms",
            "50",
            "--task-seconds",
            "0.3",
            "--task-deadline",
            "60",
            "--mix",
            "sync=40,task=25,legacy_task=15,mrtr2=5,mrtr3=5,cancel=10",
        ],
    )?;
    load_running(&Client::new()?, &cluster).await;
    // The kills are spread over the run (pacing, not waiting for anything).
    for round in 0..4 {
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let victim = round % 3;
        cluster.kill(victim);
        tokio::time::sleep(Duration::from_millis(800)).await;
        cluster.restart(victim, &[])?;
    }
    let report = load.finish(Duration::from_secs(150)).await?;
    assert_nothing_lost(&report);
    // Only requests caught on a killed process failed: transport errors or the LB's 502.
    for (kind, count) in report["failures"].as_object().into_iter().flatten() {
        assert!(matches!(kind.as_str(), "transport" | "http_502" | "http_503" | "http_504"), "{kind}: {count}");
    }
    Ok(())
}

async fn all_ready(client: &Client, cluster: &Cluster, want: u16) {
    wait_for(format!("/readyz to answer {want} on every replica"), PATIENCE, async || {
        let mut statuses = Vec::new();
        for replica in cluster.replicas.iter().flatten() {
            statuses.push(client.get(&format!("http://{}/readyz", replica.addr())).await?.0);
        }
        Ok(if statuses.iter().all(|s| *s == want) { Look::Done(()) } else { Look::not_yet(statuses) })
    })
    .await;
}

fn tasks_meta() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_under_load_loses_no_task() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut cluster = cluster(3).redis_args(&["--appendonly", "yes", "--appendfsync", "always"]).start()?;
    let client = Client::new()?;
    let lb = cluster.url();

    // A result completed before the outage (a task of 0.2 s, past the answer window: a task
    // to read back, not a result in the call's answer).
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": "before"}, "_meta": tasks_meta()});
    let created = client.modern(&lb, "tools/call", call).await?.json()?;
    let before = created["result"]["taskId"].as_str().context("a task")?.to_owned();
    poll_task(&client, &lb, &before, Until::Status("completed")).await;

    let load = Load::start(
        &lb,
        &[
            "--clients",
            "8",
            "--duration",
            "14",
            "--poll-ms",
            "50",
            "--task-deadline",
            "60",
            "--mix",
            "sync=30,task=40,legacy_task=30",
        ],
    )?;
    load_running(&client, &cluster).await;
    cluster.redis().stop();
    all_ready(&client, &cluster, 503).await;
    // Work that needs the store gets a clear, retryable error; work that does not goes on.
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0}, "_meta": tasks_meta()});
    let refused = client.modern(&lb, "tools/call", call).await?;
    assert_eq!(refused.status, 503, "{}", refused.body);
    let refused = refused.json()?;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap_or_default().contains("task store unavailable"), "{refused}");
    let echo = client.modern(&lb, "tools/call", json!({"name": "echo", "arguments": {"text": "still here"}})).await?;
    assert_eq!(echo.json()?["result"]["content"][0]["text"], "still here");
    // The outage lasts a while longer (pacing).
    tokio::time::sleep(Duration::from_secs(2)).await;
    cluster.redis().restart();
    all_ready(&client, &cluster, 200).await;

    let report = load.finish(Duration::from_secs(150)).await?;
    assert_nothing_lost(&report);
    let survived = client.modern(&lb, "tasks/get", json!({"taskId": before, "_meta": tasks_meta()})).await?.json()?;
    assert_eq!(survived["result"]["result"]["content"][0]["text"], "Computed before in 0.2 s", "{survived}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_restart_rotating_keys_fails_no_round() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    const NEW_KEY: &str = "k2:HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=";
    let mut cluster = cluster(3).start()?;
    let load = Load::start(&cluster.url(), &["--clients", "8", "--duration", "16", "--mix", "mrtr2=50,mrtr3=50"])?;
    load_running(&Client::new()?, &cluster).await;
    // Two passes, as docs/operations.md prescribes for key rotation: first every replica
    // learns the new key, then it becomes the one that seals (the old one still opens what
    // was sealed with it).
    let learn = format!("{CLUSTER_SEAL_KEYS},{NEW_KEY}");
    let seal = format!("{NEW_KEY},{CLUSTER_SEAL_KEYS}");
    for keys in [&learn, &seal] {
        for i in 0..3 {
            // Restarts spread over the run (pacing).
            tokio::time::sleep(Duration::from_millis(1200)).await;
            cluster.stop(i)?;
            cluster.restart(i, &[("MCPGATE_SEAL_KEYS", keys)])?;
        }
    }
    let report = load.finish(Duration::from_secs(120)).await?;
    assert_eq!(report["flows_failed"], 0, "no round failed: {report:#}");
    assert!(report["flows_ok"].as_u64().unwrap_or(0) > 0, "the load ran: {report:#}");
    // New rounds are sealed with the new key.
    let client = Client::new()?;
    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let call = json!({"name": "delete_records", "arguments": {"table": "t", "older_than_days": 1}, "_meta": caps});
    let round = client.modern(&cluster.url(), "tools/call", call).await?.json()?;
    let state = round["result"]["requestState"].as_str().unwrap_or_default();
    assert!(state.starts_with("v1.k2."), "sealed with the new key: {state}");
    Ok(())
}

/// The soft limit on open files.
fn open_files_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_waiters_on_slow_clients_keep_memory_bounded() -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    const WAITERS: usize = 5000;
    let _turn = ONE_AT_A_TIME.lock().await;
    let limit = open_files_limit();
    anyhow::ensure!(
        limit >= 12_000,
        "this test holds {WAITERS} connections open on each side; the open-files limit is {limit}: raise it \
         (e.g. `ulimit -n 20000`; ./scripts/test raises it to the hard limit)"
    );
    // One replica that serves tasks but runs none: every task stays working, so every
    // tasks/result waits.
    let cluster = Cluster::builder(1)
        .env("MCPGATE_TOOLSET", "conformance")
        .env("MCPGATE_TASKS_MAX_RUNNING", "0")
        .env("MCPGATE_HTTP_SSE_KEEPALIVE_SECS", "1")
        .start()?;
    let replica = cluster.replica(0);
    let url = replica.url();
    let client = Client::new()?;
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "waiters", "version": "1"}});
    let session = client.legacy(&url, "initialize", init, None).await?.session.context("a session")?;

    // Create the tasks, 64 at a time.
    let mut ids = Vec::with_capacity(WAITERS);
    for chunk in (0..WAITERS).collect::<Vec<_>>().chunks(64) {
        let creates = chunk.iter().map(|n| {
            let (client, url, session) = (client.clone(), url.clone(), session.clone());
            let call =
                json!({"name": "slow_compute", "arguments": {"seconds": 1, "label": format!("w{n}")}, "task": {}});
            async move { anyhow::Ok(client.legacy(&url, "tools/call", call, Some(&session)).await?.json()?) }
        });
        for created in futures_util::future::join_all(creates).await {
            ids.push(created?["result"]["task"]["taskId"].as_str().context("a task")?.to_owned());
        }
    }
    // Four waves of slow clients: each sends tasks/result and never reads a byte of the
    // answer. The first wave's growth is the cost of a waiter. The next ones may still raise
    // the heap's high-water mark a little less each time (the allocator keeps freed memory
    // while the previous wave's waiters are torn down); a leak would instead grow every wave
    // by a good share of the first wave's cost.
    let addr = replica.addr().to_owned();
    let mut rss = vec![replica.rss_kib()?];
    let mut sockets = Vec::with_capacity(WAITERS);
    for _wave in 0..4 {
        drop(std::mem::take(&mut sockets));
        // The replica notices closed waiters at their next keep-alive (every second).
        tokio::time::sleep(Duration::from_millis(2500)).await;
        for (n, id) in ids.iter().enumerate() {
            let body =
                json!({"jsonrpc": "2.0", "id": n, "method": "tasks/result", "params": {"taskId": id}}).to_string();
            let request = format!(
                "POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
                 Accept: application/json, text/event-stream\r\nMcp-Session-Id: {session}\r\n\
                 MCP-Protocol-Version: 2025-11-25\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            let mut socket = tokio::net::TcpStream::connect(&addr).await?;
            socket.write_all(request.as_bytes()).await?;
            sockets.push(socket);
        }
        // Let every waiter park and a few keep-alives go out.
        tokio::time::sleep(Duration::from_secs(3)).await;
        rss.push(replica.rss_kib()?);
    }
    let first = rss[1].saturating_sub(rss[0]);
    let last = rss[4].saturating_sub(rss[3]);
    println!(
        "RSS of one replica: {} KiB idle, {} KiB with {WAITERS} parked tasks/result waiters ({} B each), then {:?} KiB \
         with later waves",
        rss[0],
        rss[1],
        first * 1024 / WAITERS as u64,
        &rss[2..]
    );
    assert!(first < 64 * WAITERS as u64, "{WAITERS} waiters grew RSS by {first} KiB (over 64 KiB each)");
    assert!(last < first / 5 + 4096, "a fourth wave grew RSS again by {last} KiB (after {first} KiB): a leak?");

    // The replica still answers, and its request slots are free (waiters hold none).
    let (_, metrics) = client.get(&format!("http://{addr}/metrics")).await?;
    assert!(metrics.contains("mcpgate_in_flight_requests "), "{metrics}");
    let echo = client.legacy(&url, "tools/list", json!({}), Some(&session)).await?;
    assert!(echo.json()?["result"]["tools"].is_array());
    drop(sockets);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_stall_under_load_loses_no_task() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let mut cluster = cluster(3).start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let load = Load::start(
        &lb,
        &[
            "--clients",
            "8",
            "--duration",
            "14",
            "--poll-ms",
            "50",
            "--task-seconds",
            "0.3",
            "--task-deadline",
            "60",
            "--mix",
            "sync=30,task=40,legacy_task=30",
        ],
    )?;
    load_running(&client, &cluster).await;
    // Frozen for six command timeouts: every call in flight times out, connections stay open.
    cluster.redis().pause();
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.redis().resume();
    // The fleet serves tasks again: a task created now completes (a no-op one: answered with
    // its result when it ends within the answer window, else read back once).
    let resumed = tokio::time::Instant::now();
    let done = wait_for("a task created after the stall to complete", PATIENCE, async || {
        let call =
            json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "after"}, "_meta": tasks_meta()});
        let reply = client.modern(&lb, "tools/call", call).await?;
        if reply.status != 200 {
            return Ok(Look::NotYet(format!("tools/call: HTTP {} {}", reply.status, reply.body)));
        }
        let answer = reply.json()?;
        if answer["result"]["resultType"] == "complete" {
            return Ok(Look::Done(answer["result"].clone()));
        }
        let Some(id) = answer["result"]["taskId"].as_str().map(str::to_owned) else {
            return Ok(Look::NotYet(format!("tools/call: no task: {}", reply.body)));
        };
        let task = client.modern(&lb, "tasks/get", json!({"taskId": id, "_meta": tasks_meta()})).await?.json()?;
        Ok(if task["result"]["status"] == "completed" {
            Look::Done(task["result"]["result"].clone())
        } else {
            Look::not_yet(task)
        })
    })
    .await;
    println!("a task completed {:?} after Redis came back", resumed.elapsed());
    assert_eq!(done["content"][0]["text"], "Computed after in 0 s", "{done}");

    let report = load.finish(Duration::from_secs(150)).await?;
    assert_nothing_lost(&report);
    for (kind, count) in report["failures"].as_object().into_iter().flatten() {
        assert!(matches!(kind.as_str(), "transport" | "http_502" | "http_503" | "http_504"), "{kind}: {count}");
    }
    // The stall was seen as timeouts, not as dead connections.
    let mut timeouts = 0.0;
    for i in 0..3 {
        let (_, text) = client.get(&format!("http://{}/metrics", cluster.replica(i).addr())).await?;
        timeouts += text
            .lines()
            .find_map(|l| l.strip_prefix("mcpgate_redis_call_failures_total{kind=\"timeout\"} "))
            .and_then(|n| n.parse::<f64>().ok())
            .unwrap_or(0.0);
    }
    assert!(timeouts > 0.0, "the stall was counted as timeouts");
    Ok(())
}
