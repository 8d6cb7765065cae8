//! The load generator's task counters against a real deployment (Redis, nginx, two replicas,
//! the counted-runs FastMCP server as an HTTP upstream whose `count_run` runs as a task): a
//! mixed load has no acknowledged task missing or stuck and runs no key twice; a key that did
//! run twice is counted as a double run, and a task whose data Redis lost as missing.
//!
//! The tests take turns: each starts a whole deployment.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use mcpgate_e2e::{COUNTED_RUNS, Client, Cluster, HttpServer, Load, LoadReport, PATIENCE, counted_runs_config};

static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Two replicas serving the built-in toolsets the scenarios call, plus `counted` as upstream
/// `c`, its `count_run` a task whenever the client declares the tasks extension.
fn cluster(dir: &Path, counted: &HttpServer) -> anyhow::Result<Cluster> {
    let config = counted_runs_config(dir, counted)?;
    Cluster::builder(2).args(&["--config", &config.to_string_lossy()]).start()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_load_loses_no_task_and_runs_none_twice() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let counted = HttpServer::fastmcp_script("counted_runs_server.py", dir.path())?;
    let cluster = cluster(dir.path(), &counted)?;
    let mut args = vec![
        "--clients",
        "6",
        "--duration",
        "4",
        "--poll-ms",
        "50",
        "--task-seconds",
        "0.2",
        "--task-deadline",
        "60",
        "--mix",
        "sync=20,task=20,legacy_task=20,task_input=20,mrtr2=10,cancel=10",
    ];
    args.extend(COUNTED_RUNS);
    let LoadReport { code, report } =
        Load::start(&cluster.url(), &args)?.finish_with_code(Duration::from_secs(120)).await?;
    let tasks = &report["tasks"];
    assert_eq!(code, Some(0), "{report:#}");
    assert_eq!(report["integrity_failures"], 0, "{report:#}");
    for counter in ["acknowledged_missing", "stuck", "duplicated", "double_runs"] {
        assert_eq!(tasks[counter], 0, "{counter}: {report:#}");
    }
    assert!(tasks["created"].as_u64().unwrap_or(0) > 0, "the load created tasks: {report:#}");
    assert_eq!(tasks["created"], tasks["ended"], "every created task ended: {report:#}");
    for scenario in ["task", "legacy_task", "task_input"] {
        let ok = report["scenarios"].as_array().into_iter().flatten().find(|s| s["scenario"] == scenario);
        assert!(ok.is_some_and(|s| s["ok"].as_u64().unwrap_or(0) > 0), "{scenario} ran: {report:#}");
    }
    // Every counted task the load created ran exactly once, by the ledger's own count.
    let runs = &report["runs"];
    assert!(runs["error"].is_null(), "{report:#}");
    assert!(runs["keys"].as_u64().unwrap_or(0) > 0, "counted tasks were created: {report:#}");
    assert_eq!(runs["ran"], runs["keys"], "{report:#}");
    assert_eq!(runs["ledger_runs"], runs["keys"], "nothing else ran the counted tool: {report:#}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_run_twice_is_a_double_run() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let counted = HttpServer::fastmcp_script("counted_runs_server.py", dir.path())?;
    let cluster = cluster(dir.path(), &counted)?;
    // The key of client 0's first flow in run `twice` is `twice-0-0`: run it once beforehand
    // (a synchronous call), so the load's task is its second run.
    let client = Client::new()?;
    let call = json!({"name": "c_count_run", "arguments": {"key": "twice-0-0"}});
    let before: serde_json::Value = client.modern(&cluster.url(), "tools/call", call).await?.json()?;
    assert_eq!(before["result"]["content"][0]["text"], "ran twice-0-0", "{before}");

    let mut args = vec!["--clients", "1", "--flows", "1", "--mix", "task=1", "--poll-ms", "50", "--run-tag", "twice"];
    args.extend(COUNTED_RUNS);
    let LoadReport { code, report } =
        Load::start(&cluster.url(), &args)?.finish_with_code(Duration::from_secs(90)).await?;
    assert_eq!(report["flows_ok"], 1, "the task itself succeeded: {report:#}");
    assert_eq!(report["tasks"]["double_runs"], 1, "{report:#}");
    assert_eq!(report["runs"]["keys"], 1, "{report:#}");
    assert_eq!(report["runs"]["ran"], 1, "{report:#}");
    assert_eq!(report["integrity_failures"], 1, "{report:#}");
    assert_eq!(code, Some(1), "a double run fails the run: {report:#}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_redis_lost_or_that_outlive_the_deadline_are_counted() -> anyhow::Result<()> {
    let _turn = ONE_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir()?;
    let counted = HttpServer::fastmcp_script("counted_runs_server.py", dir.path())?;
    let mut cluster = cluster(dir.path(), &counted)?;
    let args = [
        "--clients",
        "1",
        "--flows",
        "1",
        "--mix",
        "task=1",
        "--poll-ms",
        "100",
        "--task-seconds",
        "5",
        "--task-deadline",
        "30",
    ];
    let load = Load::start(&cluster.url(), &args)?;
    // Once its one task runs, Redis restarts without persistence: the acknowledged task is gone.
    let client = Client::new()?;
    cluster.executing_replica_soon(&client).await?;
    cluster.redis().restart();
    let LoadReport { code, report } = load.finish_with_code(PATIENCE * 2).await?;
    assert_eq!(report["tasks"]["created"], 1, "{report:#}");
    assert_eq!(report["tasks"]["acknowledged_missing"], 1, "{report:#}");
    assert_eq!(report["tasks"]["stuck"], 0, "{report:#}");
    assert_eq!(report["tasks"]["lost"], 1, "{report:#}");
    assert_eq!(code, Some(1), "a missing task fails the run: {report:#}");

    // A task still working at the deadline is stuck (the fleet serves again after the restart).
    let args = ["--clients", "1", "--flows", "1", "--mix", "task=1", "--task-seconds", "60", "--task-deadline", "2"];
    let LoadReport { code, report } = Load::start(&cluster.url(), &args)?.finish_with_code(PATIENCE * 2).await?;
    assert_eq!(report["tasks"]["created"], 1, "{report:#}");
    assert_eq!(report["tasks"]["stuck"], 1, "{report:#}");
    assert_eq!(report["tasks"]["acknowledged_missing"], 0, "{report:#}");
    assert_eq!(code, Some(1), "a stuck task fails the run: {report:#}");
    Ok(())
}
