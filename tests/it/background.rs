//! Background tools through nginx in front of three replicas: a client that takes no tasks
//! starts one on one replica and follows it with the companion tools on the others.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster};

async fn call(client: &Client, url: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    let reply = client.modern(url, "tools/call", json!({"name": tool, "arguments": arguments})).await?.json()?;
    Ok(reply["result"].clone())
}

/// `task_result` on `url` (bounded) until the task is no longer working.
async fn result_when_done(client: &Client, url: &str, id: &str) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let result = call(client, url, "task_result", json!({"taskId": id})).await?;
        if result["structuredContent"]["status"] != "working" {
            return Ok(result);
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "never finished: {result}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_is_followed_from_every_replica() -> anyhow::Result<()> {
    let cluster = Cluster::builder(3).env("MCPGATE_TOOLSET", "demo").start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);

    let started = call(&client, &url(0), "background_report", json!({"topic": "otters", "seconds": 2})).await?;
    let id = started["structuredContent"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {started}")).to_owned();
    let status = call(&client, &url(1), "task_status", json!({"taskId": id})).await?;
    assert_eq!(status["structuredContent"]["status"], "working", "{status}");
    let done = result_when_done(&client, &url(2), &id).await?;
    assert_eq!(done["content"][0]["text"], "Report on otters: 2 sections compiled.", "{done}");

    // Cancelled from another replica than the one running it: the work stops.
    let long = call(&client, &url(1), "background_report", json!({"topic": "moles", "seconds": 60})).await?;
    let id = long["structuredContent"]["taskId"].as_str().expect("a task").to_owned();
    let running = cluster.executing_replica_soon(&client).await?;
    let other = url((running + 1) % 3);
    let cancelled = call(&client, &other, "task_cancel", json!({"taskId": id})).await?;
    assert!(cancelled["content"][0]["text"].as_str().unwrap_or_default().contains("cancelled"), "{cancelled}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while cluster.executing_replica(&client).await?.is_some() {
        assert!(tokio::time::Instant::now() < deadline, "the cancelled work still runs");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_tool_marked_background_answers_at_once() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fm = mcpgate_e2e::HttpServer::fastmcp(dir.path())?;
    let config = dir.path().join("mcpgate.toml");
    let table =
        format!("[[upstream]]\nname = \"fm\"\ntransport = \"http\"\nurl = \"{}\"\nbackground = [\"slo*\"]\n", fm.url());
    std::fs::write(&config, table)?;
    let cluster = Cluster::builder(3).args(&["--config", &config.to_string_lossy()]).start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);

    let started = call(&client, &url(0), "fm_slow", json!({"tag": "bg", "seconds": 1.0})).await?;
    let id = started["structuredContent"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {started}")).to_owned();
    // Tools not marked stay plain.
    assert_eq!(call(&client, &url(1), "fm_add", json!({"a": 2, "b": 3})).await?["content"][0]["text"], "5");
    let done = result_when_done(&client, &url(2), &id).await?;
    assert_eq!(done["content"][0]["text"], "slept 1.0", "the upstream's own result: {done}");
    Ok(())
}
