//! Background tools through nginx in front of three replicas with Redis and JWT auth: clients
//! that take no tasks (a 2025-11-25 session without the tasks capability, a 2026-07-28 client
//! without the tasks extension) start a built-in and an upstream background tool, follow them
//! with the companion tools on whichever replica the balancer picks, cancel one (the work
//! stops), and another principal cannot see them.

use std::path::Path;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Look, PATIENCE, eventually, wait_for};

/// A caller: its bearer token and, for a 2025-11-25 client, its session.
struct Agent<'a> {
    client: &'a Client,
    auth: String,
    session: Option<String>,
}

impl<'a> Agent<'a> {
    /// A 2026-07-28 client that does not declare the tasks extension.
    fn modern(client: &'a Client, sub: &str) -> anyhow::Result<Self> {
        Ok(Self { client, auth: crate::jwt::bearer(sub)?, session: None })
    }

    /// A 2025-11-25 client whose session declares no tasks capability.
    async fn legacy(client: &'a Client, url: &str, sub: &str) -> anyhow::Result<Self> {
        let auth = crate::jwt::bearer(sub)?;
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "e2e-legacy", "version": "1"}});
        let headers = [("authorization", auth.as_str())];
        let init = client.legacy_with(url, &headers, "initialize", params, None).await?;
        let session = init.session.clone().ok_or_else(|| anyhow::anyhow!("no session id: {}", init.body))?;
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let posted = client.legacy_message(url, &session, &[("authorization", auth.as_str())], &initialized).await?;
        anyhow::ensure!(posted.status == 202, "initialized not accepted");
        Ok(Self { client, auth, session: Some(session) })
    }

    /// `tools/call` at `url`; the JSON-RPC result (an error reply fails).
    async fn call(&self, url: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        let params = json!({"name": tool, "arguments": arguments});
        let headers = [("authorization", self.auth.as_str())];
        let reply = match &self.session {
            Some(session) => self.client.legacy_with(url, &headers, "tools/call", params, Some(session)).await?,
            None => self.client.modern_with(url, &headers, "tools/call", params).await?,
        };
        let json = reply.json()?;
        json.get("result").cloned().ok_or_else(|| anyhow::anyhow!("{tool}: no result: {json}"))
    }

    /// Starts a background tool; the task id it answers with at once.
    async fn start(&self, url: &str, tool: &str, arguments: Value) -> anyhow::Result<String> {
        let started = self.call(url, tool, arguments).await?;
        anyhow::ensure!(started.get("isError").is_none_or(|e| e == false), "{tool} refused: {started}");
        anyhow::ensure!(text(&started).contains("task_status"), "the answer says how to follow it: {started}");
        let id = started["structuredContent"]["taskId"].as_str();
        Ok(id.ok_or_else(|| anyhow::anyhow!("{tool}: no task id: {started}"))?.to_owned())
    }
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

/// Follows a task with `task_status` until it completes (bounded); asserts progress was seen
/// strictly between 0 and 1 with a message on the way, then fetches `task_result`.
async fn follow(agent: &Agent<'_>, url: &str, id: &str) -> anyhow::Result<Value> {
    let mut seen_progress = None;
    wait_for(format!("task {id} to complete (task_status)"), PATIENCE, async || {
        let status = agent.call(url, "task_status", json!({"taskId": id})).await?;
        let report = &status["structuredContent"];
        match report["status"].as_str() {
            Some("completed") => {
                anyhow::ensure!(report["progress"] == 1.0, "done is all done: {status}");
                return Ok(Look::Done(()));
            }
            Some("working") => {
                anyhow::ensure!(report["pollAfterMs"].is_u64(), "{status}");
                if let Some(p) = report["progress"].as_f64().filter(|p| *p > 0.0 && *p < 1.0) {
                    anyhow::ensure!(report["message"].as_str().is_some_and(|m| !m.is_empty()), "{status}");
                    seen_progress = Some(p);
                }
            }
            _ => anyhow::bail!("unexpected status: {status}"),
        }
        Ok(Look::not_yet(status))
    })
    .await;
    anyhow::ensure!(seen_progress.is_some(), "task {id}: no progress between 0 and 1 seen");
    agent.call(url, "task_result", json!({"taskId": id})).await
}

/// Bounded wait for a marker file the FastMCP fixture writes.
async fn marker(dir: &Path, name: &str) {
    eventually!(dir.join(name).exists(), "the marker {name} to appear");
}

/// Bounded wait until no replica runs a task (cancelled work has stopped).
async fn idle(cluster: &Cluster, client: &Client) {
    eventually!(cluster.executing_replica(client).await?.is_none(), "cancelled work to stop on every replica");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_tasks_start_follow_and_cancel_background_work_through_the_balancer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fm = mcpgate_e2e::HttpServer::fastmcp(dir.path())?;
    let config = dir.path().join("mcpgate.toml");
    let table = format!(
        "toolset = [\"demo\"]\n[[upstream]]\nname = \"fm\"\ntransport = \"http\"\nurl = \"{}\"\nbackground = [\"slow\", \"wait\"]\n",
        fm.url()
    );
    std::fs::write(&config, table)?;
    let cluster = crate::jwt::with_jwt(Cluster::builder(3)).args(&["--config", &config.to_string_lossy()]).start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let legacy = Agent::legacy(&client, &lb, "alice").await?;
    let modern = Agent::modern(&client, "carol")?;
    let bob = Agent::modern(&client, "bob")?;

    // Every replica serves the upstream's tools (one still reading them retries within seconds).
    for i in 0..3 {
        // Its log is printed if this times out (the cluster drops while panicking).
        wait_for(format!("replica {i} to list fm_slow"), PATIENCE, async || {
            let tools = client
                .modern_with(&cluster.replica_url(i), &[("authorization", &modern.auth)], "tools/list", json!({}))
                .await?;
            Ok(if tools.body.contains("\"fm_slow\"") { Look::Done(()) } else { Look::NotYet(tools.body) })
        })
        .await;
    }
    // Tools not marked stay plain.
    assert_eq!(text(&modern.call(&lb, "fm_add", json!({"a": 2, "b": 3})).await?), "5");

    // Both kinds of client, a built-in and an upstream background tool, all at once: each
    // answers with a task id, and the status polls (round-robin) land on every replica.
    let at = lb.as_str();
    let runs = [(&legacy, "legacy"), (&modern, "modern")].map(|(agent, who)| async move {
        let lb = at;
        let report = agent.start(lb, "background_report", json!({"topic": who, "seconds": 4})).await?;
        let slow = agent.start(lb, "fm_slow", json!({"tag": who, "seconds": 4.0})).await?;
        let (report_done, slow_done) = tokio::try_join!(follow(agent, lb, &report), follow(agent, lb, &slow))?;
        assert_eq!(text(&report_done), format!("Report on {who}: 4 sections compiled."), "{report_done}");
        assert_eq!(text(&slow_done), "slept 4.0", "the upstream's own result: {slow_done}");
        anyhow::Ok(report)
    });
    let [legacy_report, modern_report] = futures_util::future::try_join_all(runs)
        .await?
        .try_into()
        .map_err(|v: Vec<String>| anyhow::anyhow!("{} runs", v.len()))?;

    // Another principal: "not found" on every replica, for each companion, for either id.
    for id in [&legacy_report, &modern_report] {
        for i in 0..3 {
            let theirs = bob.call(&cluster.replica_url(i), "task_status", json!({"taskId": id})).await?;
            assert_eq!(theirs["isError"], true, "replica {i}: {theirs}");
            assert!(text(&theirs).contains("not found"), "replica {i}: {theirs}");
        }
        let result = bob.call(&lb, "task_result", json!({"taskId": id})).await?;
        assert!(text(&result).contains("not found"), "{result}");
    }

    // Cancelled through the balancer: the upstream's work stops (its cancellation marker)...
    let waiting = legacy.start(&lb, "fm_wait", json!({"tag": "stop-me", "seconds": 60})).await?;
    marker(dir.path(), "started-stop-me").await;
    let refused = bob.call(&lb, "task_cancel", json!({"taskId": waiting})).await?;
    assert!(text(&refused).contains("not found"), "{refused}");
    let cancelled = legacy.call(&lb, "task_cancel", json!({"taskId": waiting})).await?;
    assert!(text(&cancelled).contains("cancelled"), "{cancelled}");
    marker(dir.path(), "cancelled-stop-me").await;
    let status = legacy.call(&lb, "task_status", json!({"taskId": waiting})).await?;
    assert_eq!(status["structuredContent"]["status"], "cancelled", "{status}");

    idle(&cluster, &client).await;

    // ...and so does a built-in tool's, on whichever replica runs it.
    let long = modern.start(&lb, "background_report", json!({"topic": "moles", "seconds": 60})).await?;
    cluster.executing_replica_soon(&client).await?;
    let cancelled = modern.call(&lb, "task_cancel", json!({"taskId": long})).await?;
    assert!(text(&cancelled).contains("cancelled"), "{cancelled}");
    idle(&cluster, &client).await;
    let result = modern.call(&lb, "task_result", json!({"taskId": long})).await?;
    assert_eq!(result["isError"], true, "a cancelled task's result says so: {result}");
    Ok(())
}
