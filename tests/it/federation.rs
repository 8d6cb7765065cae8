//! Upstream servers behind the gateway, through nginx in front of three replicas sharing
//! Redis: the reference `server-everything` over stdio (imported from an `mcpServers` file),
//! over Streamable HTTP (2025-11-25) and over HTTP+SSE (2024-11-05), a FastMCP server
//! (2026-07-28) and mcpgate itself;
//! clients of both eras; progress and cancellation; calls that become tasks; a replica killed
//! mid-call; upstreams that die or answer garbage; configuration errors.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use anyhow::Context as _;
use mcpgate_e2e::{
    Client, Cluster, Gateway, HttpServer, Look, PATIENCE, TaskPoll, Until, eventually, fastmcp_python, fixture,
    poll_task, run_to_end, server_everything, settle, wait_for,
};

const EXT: &str = "io.modelcontextprotocol/tasks";

/// A config file in `dir` with `body`, for `--config`.
fn config_file(dir: &Path, body: &str) -> anyhow::Result<String> {
    let path = dir.join("mcpgate.toml");
    std::fs::write(&path, body)?;
    Ok(path.to_string_lossy().into_owned())
}

/// An `[[upstream]]` table.
fn http_upstream(name: &str, url: &str, extra: &str) -> String {
    format!("[[upstream]]\nname = \"{name}\"\ntransport = \"http\"\nurl = \"{url}\"\n{extra}\n")
}

fn cluster_with(config: &str) -> anyhow::Result<Cluster> {
    Cluster::builder(3)
        .env("MCPGATE_TASKS_LEASE_MS", "1500")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "750")
        .args(&["--config", config])
        .start()
}

/// A modern request; `tasks` declares the tasks extension.
async fn modern(client: &Client, url: &str, method: &str, mut params: Value, tasks: bool) -> anyhow::Result<Value> {
    if tasks {
        params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    }
    Ok(client.modern(url, method, params).await?.json()?)
}

async fn call(client: &Client, url: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    let reply = modern(client, url, "tools/call", json!({"name": tool, "arguments": arguments}), false).await?;
    Ok(reply["result"].clone())
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

async fn legacy_session(client: &Client, url: &str) -> anyhow::Result<String> {
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let reply = client.legacy(url, "initialize", init, None).await?;
    reply.session.ok_or_else(|| anyhow::anyhow!("no session id: {}", reply.body))
}

/// Waits (bounded) until the marker file `path` exists.
async fn appears(path: &Path) {
    eventually!(path.exists(), "the marker {} to appear", path.display());
}

/// How many runs the FastMCP fixture started under `tag`.
fn starts(markers: &Path, tag: &str) -> usize {
    std::fs::read_to_string(markers.join(format!("started-{tag}"))).map_or(0, |s| s.lines().count())
}

fn tool_names(list: &Value) -> Vec<String> {
    list["result"]["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_upstream_through_the_load_balancer() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let everything = server_everything()?;
    let evh = HttpServer::everything()?;
    let old = HttpServer::everything_sse()?;
    let fm = HttpServer::fastmcp(dir.path())?;
    let inner = Gateway::builder().args(&["--listen", "127.0.0.1:0", "--toolset", "demo"]).start()?;
    // The stdio server comes from a Claude Desktop file, as operators have them.
    let servers = dir.path().join("claude_desktop_config.json");
    let desktop = json!({"mcpServers": {"Everything": {"command": "node", "args": [everything, "stdio"]}}});
    std::fs::write(&servers, desktop.to_string())?;
    let config = format!(
        "[federation]\nmcp_servers_file = \"{}\"\n{}{}{}{}",
        servers.display(),
        http_upstream("evh", &evh.url(), ""),
        http_upstream("old", &old.url(), "").replace("\"http\"", "\"sse\""),
        http_upstream("fm", &fm.url(), ""),
        http_upstream("gw", &inner.url(), ""),
    );
    let cluster = cluster_with(&config_file(dir.path(), &config)?)?;
    let client = Client::new()?;
    let lb = cluster.url();

    // One merged list, in config order: the import, then the tables; the demo tools are off.
    let names = tool_names(&modern(&client, &lb, "tools/list", json!({}), false).await?);
    for expected in ["everything_echo", "evh_get-sum", "old_get-sum", "fm_add", "gw_echo"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n == "echo"), "built-in demo tools are off with upstreams: {names:?}");
    let first = |prefix: &str| names.iter().position(|n| n.starts_with(prefix)).unwrap_or(usize::MAX);
    assert!(first("everything_") < first("evh_") && first("evh_") < first("old_"));
    assert!(first("old_") < first("fm_") && first("fm_") < first("gw_"));

    // A call to each upstream, each on whichever replica nginx picks.
    assert_eq!(text(&call(&client, &lb, "everything_echo", json!({"message": "hi"})).await?), "Echo: hi");
    assert!(text(&call(&client, &lb, "evh_get-sum", json!({"a": 2, "b": 3})).await?).contains('5'));
    assert!(text(&call(&client, &lb, "old_get-sum", json!({"a": 20, "b": 22})).await?).contains("42"));
    assert_eq!(text(&call(&client, &lb, "fm_add", json!({"a": 1, "b": 2})).await?), "3");
    assert_eq!(text(&call(&client, &lb, "gw_echo", json!({"text": "nested"})).await?), "nested");
    // Bad arguments come back as the upstream said them.
    let bad = modern(&client, &lb, "tools/call", json!({"name": "fm_add", "arguments": {"a": "x"}}), false).await?;
    assert!(bad.get("error").is_some() || bad["result"]["isError"] == true, "{bad}");

    // A 2025-11-25 session reaches the same upstreams.
    let session = legacy_session(&client, &lb).await?;
    let list = client.legacy(&lb, "tools/list", json!({}), Some(&session)).await?.json()?;
    assert!(tool_names(&list).iter().any(|n| n == "fm_add"), "{list}");
    let params = json!({"name": "evh_echo", "arguments": {"message": "legacy"}});
    let reply = client.legacy(&lb, "tools/call", params, Some(&session)).await?.json()?;
    assert_eq!(text(&reply["result"]), "Echo: legacy", "{reply}");

    // Prompts and resources route to their upstream too.
    let prompt = modern(&client, &lb, "prompts/get", json!({"name": "everything_simple-prompt"}), false).await?;
    assert!(prompt["result"]["messages"].as_array().is_some_and(|m| !m.is_empty()), "{prompt}");
    let uri = "demo://resource/static/document/architecture.md";
    let read = modern(&client, &lb, "resources/read", json!({"uri": uri}), false).await?;
    assert_eq!(read["result"]["contents"][0]["uri"], uri, "{read}");

    // Each replica reports its upstreams.
    let (status, body) = client.get(&format!("http://{}/upstreams", cluster.replica(0).addr())).await?;
    assert_eq!(status, 200);
    let upstreams: Value = serde_json::from_str(&body)?;
    let upstreams = upstreams["upstreams"].as_array().cloned().unwrap_or_default();
    assert_eq!(upstreams.len(), 5, "{body}");
    for u in &upstreams {
        assert_eq!(u["breaker"], "closed", "{u}");
        assert!(u["catalog"]["tools"].as_u64().unwrap_or(0) > 0, "{u}");
    }
    let (_, metrics) = client.get(&format!("http://{}/metrics", cluster.replica(1).addr())).await?;
    assert!(metrics.contains("mcpgate_upstream_requests_total{upstream=\"fm\"}"), "{metrics}");
    assert!(metrics.contains("mcpgate_upstream_request_duration_seconds_bucket{upstream=\"everything\""));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_relayed_and_cancellation_reaches_the_upstream() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let markers = dir.path().to_path_buf();
    let fm = HttpServer::fastmcp(&markers)?;
    let config = http_upstream("fm", &fm.url(), "tool_task = { wait = \"optional\" }");
    let cluster = cluster_with(&config_file(dir.path(), &config)?)?;
    let client = Client::new()?;
    let lb = cluster.url();
    let session = legacy_session(&client, &lb).await?;

    // Progress from the upstream reaches a 2025-11-25 client on its stream, then the result.
    let params =
        json!({"name": "fm_slow", "arguments": {"tag": "p", "seconds": 1.0}, "_meta": {"progressToken": "pt"}});
    let mut stream = client.legacy_stream(&lb, "tools/call", params, &session).await?;
    let mut progress = 0;
    let result = loop {
        let message = stream.next(Duration::from_secs(20)).await?.ok_or_else(|| anyhow::anyhow!("stream ended"))?;
        if message["method"] == "notifications/progress" {
            assert_eq!(message["params"]["progressToken"], "pt", "{message}");
            progress += 1;
        } else {
            break message;
        }
    };
    assert!(progress >= 1, "no progress relayed before {result}");
    assert_eq!(text(&result["result"]), "slept 1.0", "{result}");

    // A client that disconnects cancels the upstream call.
    let params = json!({"name": "fm_wait", "arguments": {"tag": "gone"}, "_meta": {"progressToken": 1}});
    let stream = client.legacy_stream(&lb, "tools/call", params, &session).await?;
    appears(&markers.join("started-gone")).await;
    drop(stream);
    appears(&markers.join("cancelled-gone")).await;

    // So does the client's notifications/cancelled, on whichever replica it lands.
    let params = json!({"name": "fm_wait", "arguments": {"tag": "noted"}, "_meta": {"progressToken": 2}});
    let mut stream = client.legacy_stream(&lb, "tools/call", params, &session).await?;
    appears(&markers.join("started-noted")).await;
    let note =
        json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1, "reason": "user"}});
    for _ in 0..3 {
        // Through nginx: one of these lands on another replica than the call's.
        assert_eq!(client.legacy_message(&lb, &session, &[], &note).await?.status, 202);
    }
    appears(&markers.join("cancelled-noted")).await;
    assert!(stream.next(Duration::from_secs(5)).await?.is_none(), "a cancelled call sends no result");

    // Cancelling a task (on whichever replica) cancels the upstream call it runs.
    let params = json!({"name": "fm_wait", "arguments": {"tag": "task"}});
    let created = modern(&client, &lb, "tools/call", params, true).await?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    appears(&markers.join("started-task")).await;
    let cancelled = modern(&client, &lb, "tasks/cancel", json!({"taskId": id}), true).await?;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    appears(&markers.join("cancelled-task")).await;
    assert_eq!(poll_task(&client, &lb, &id, Until::Terminal).await["status"], "cancelled");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_calls_become_tasks_and_fast_ones_stay_synchronous() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fm = HttpServer::fastmcp(dir.path())?;
    let config = http_upstream("fm", &fm.url(), "task_after_ms = 300");
    let cluster = cluster_with(&config_file(dir.path(), &config)?)?;
    let client = Client::new()?;
    let lb = cluster.url();

    // Fast: answered in the request, even for a client that can take a task.
    let fast =
        modern(&client, &lb, "tools/call", json!({"name": "fm_add", "arguments": {"a": 2, "b": 2}}), true).await?;
    assert_eq!((fast["result"]["resultType"].as_str(), text(&fast["result"]).as_str()), (Some("complete"), "4"));

    // Slow: a task once it has run 300 ms; the call goes on behind it (the task is still
    // working when first read, long before the call's 6 s are up) and any replica reports it.
    let params = json!({"name": "fm_slow", "arguments": {"tag": "auto", "seconds": 6.0}});
    let created = modern(&client, &lb, "tools/call", params, true).await?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap_or_default().to_owned();
    let first = modern(&client, &lb, "tasks/get", json!({"taskId": id}), true).await?;
    assert_eq!(first["result"]["status"], "working", "the task came before the call ended: {first}");
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(text(&done["result"]), "slept 6.0", "{done}");
    assert_eq!(starts(dir.path(), "auto"), 1, "the call ran once");

    // A client that cannot take a task waits for the result.
    let params = json!({"name": "fm_slow", "arguments": {"tag": "plain", "seconds": 0.6}});
    let plain = modern(&client, &lb, "tools/call", params, false).await?;
    assert_eq!(text(&plain["result"]), "slept 0.6", "{plain}");

    // A 2025-11-25 client that asks for a task gets one at once.
    let session = legacy_session(&client, &lb).await?;
    let params = json!({"name": "fm_slow", "arguments": {"tag": "legacy", "seconds": 0.5}, "task": {"ttl": 60000}});
    let created = client.legacy(&lb, "tools/call", params, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    TaskPoll::new(&client, &lb).legacy(&session).until(&id, Until::Status("completed")).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_replica_reruns_idempotent_calls_and_fails_the_others() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let markers = dir.path().to_path_buf();
    let fm = HttpServer::fastmcp(&markers)?;
    let config = http_upstream("fm", &fm.url(), "task = \"optional\"");
    let mut cluster = cluster_with(&config_file(dir.path(), &config)?)?;
    let client = Client::new()?;
    let lb = cluster.url();

    // Idempotent (idempotentHint): taken over by another replica and run again.
    let params = json!({"name": "fm_slow_safe", "arguments": {"tag": "safe", "seconds": 3.0}});
    let created = modern(&client, &lb, "tools/call", params, true).await?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    appears(&markers.join("started-safe")).await;
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(starts(&markers, "safe"), 2, "run again after the kill");

    // Not idempotent: never run twice; the task fails saying why.
    let params = json!({"name": "fm_slow", "arguments": {"tag": "once", "seconds": 3.0}});
    let created = modern(&client, &lb, "tools/call", params, true).await?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    appears(&markers.join("started-once")).await;
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "failed", "{done}");
    let message = done["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("interrupted") && message.contains("fm_slow"), "{done}");
    // A rerun would add a start: the count must stay at one once it stops changing.
    let once = settle("the starts of the non-idempotent call", Duration::from_secs(4), PATIENCE, async || {
        Ok(starts(&markers, "once"))
    })
    .await;
    assert_eq!(once, 1, "a non-idempotent call ran twice");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dead_and_broken_upstreams_give_clear_errors_and_the_rest_still_answers() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut evh = HttpServer::everything()?;
    let broken = fixture("broken_server.py");
    let config = format!(
        "[[upstream]]\nname = \"broken\"\ncommand = \"python3\"\nargs = [\"{}\"]\nmax_message_bytes = 1048576\n{}",
        broken.display(),
        http_upstream("evh", &evh.url(), "breaker_failures = 2"),
    );
    let cluster = cluster_with(&config_file(dir.path(), &config)?)?;
    let client = Client::new()?;
    let lb = cluster.url();

    // Garbage and oversized answers: a tool error naming the upstream, and no crash.
    let garbage = call(&client, &lb, "broken_garbage", json!({})).await?;
    assert_eq!(garbage["isError"], true, "{garbage}");
    assert!(text(&garbage).contains("broken") && text(&garbage).contains("cannot read"), "{garbage}");
    let huge = call(&client, &lb, "broken_huge", json!({})).await?;
    assert_eq!(huge["isError"], true, "{huge}");
    assert!(text(&huge).contains("max_message_bytes"), "{huge}");
    assert_eq!(text(&call(&client, &lb, "broken_echo", json!({"k": 1})).await?), r#"{"k":1}"#);
    // Content mcpgate has no type for is relayed as sent.
    let novel = call(&client, &lb, "broken_novel", json!({})).await?;
    assert_eq!(novel["content"], json!([{"type": "hologram", "frames": [1, 2]}]), "{novel}");
    assert_eq!((novel["x-vendor"]["k"].as_str(), novel["resultType"].as_str()), (Some("v"), Some("complete")));

    // A process that exits mid-call: a clear error, then it is started again.
    let crash = call(&client, &lb, "broken_crash", json!({})).await?;
    assert_eq!(crash["isError"], true, "{crash}");
    assert!(text(&crash).contains("Upstream broken"), "{crash}");
    wait_for("the crashed server to be started again", PATIENCE, async || {
        let echo = call(&client, &lb, "broken_echo", json!({"again": true})).await?;
        Ok(if echo["isError"] == true { Look::not_yet(echo) } else { Look::Done(()) })
    })
    .await;

    // An HTTP upstream killed mid-call: that call fails clearly, the others still answer. The
    // kill waits for the upstream's first progress report: proof the call runs there.
    let params = json!({"name": "evh_trigger-long-running-operation", "arguments": {"duration": 30, "steps": 30},
        "_meta": {"progressToken": "mid-call"}});
    let mut slow = client.modern_stream(&lb, "tools/call", params).await?;
    let progress = tokio::time::timeout(PATIENCE, async {
        loop {
            let message = slow.next(PATIENCE).await?.context("the call ended before any progress")?;
            if message["method"] == "notifications/progress" {
                return anyhow::Ok(message);
            }
            anyhow::ensure!(message.get("id").is_none(), "the call ended before any progress: {message}");
        }
    })
    .await
    .context("no progress from the upstream's call")??;
    assert_eq!(progress["params"]["progressToken"], "mid-call", "{progress}");
    evh.kill();
    let failed = slow.next_result(PATIENCE).await?;
    let failed = &failed["result"];
    assert_eq!(failed["isError"], true, "{failed}");
    assert!(text(failed).contains("Upstream evh"), "{failed}");
    // Later calls fail as unreachable (or at the open breaker), not by waiting out a timeout.
    for _ in 0..6 {
        let down = call(&client, &lb, "evh_echo", json!({"message": "x"})).await?;
        assert_eq!(down["isError"], true, "{down}");
        let why = text(&down);
        assert!(why.contains("Upstream evh"), "{down}");
        assert!(why.contains("cannot reach it") || why.contains("unavailable after"), "{down}");
    }
    assert_eq!(text(&call(&client, &lb, "broken_echo", json!({})).await?), "{}");
    let (status, _) = client.get(&format!("http://{}/readyz", cluster.replica(0).addr())).await?;
    assert_eq!(status, 200, "a dead upstream does not make a replica unready");
    // After consecutive failures each replica's breaker opens.
    let mut open = 0;
    for replica in cluster.replicas.iter().flatten() {
        let (_, body) = client.get(&format!("http://{}/upstreams", replica.addr())).await?;
        open += usize::from(body.contains("\"breaker\":\"open\""));
    }
    assert!(open >= 1, "no breaker opened");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changed_lists_reach_every_replica_and_survive_the_upstream() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let mut fm = HttpServer::fastmcp(dir.path())?;
    let config = config_file(dir.path(), &http_upstream("fm", &fm.url(), ""))?;
    // Only replica 0 re-reads the upstream often: the others learn through the store.
    let mut cluster = Cluster::builder(3)
        .replica_env(0, "MCPGATE_FEDERATION_LIST_REFRESH_SECS", "1")
        .args(&["--config", &config])
        .start()?;
    let client = Client::new()?;
    // A client listening on replica 2 hears of the change replica 0 finds.
    let listen = json!({"notifications": {"toolsListChanged": true}});
    let mut listener = client.modern_stream(&cluster.replica_url(2), "subscriptions/listen", listen).await?;
    let ack = listener.next(Duration::from_secs(5)).await?.expect("an acknowledgement");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}), "{ack}");
    assert_eq!(text(&call(&client, &cluster.replica_url(1), "fm_grow", json!({"name": "fresh"})).await?), "added");
    let heard = listener.next(Duration::from_secs(15)).await?.expect("a list change");
    assert_eq!(heard["method"], "notifications/tools/list_changed", "{heard}");
    for i in 0..3 {
        wait_for(format!("replica {i} to list fm_fresh"), PATIENCE, async || {
            let names = tool_names(&modern(&client, &cluster.replica_url(i), "tools/list", json!({}), false).await?);
            Ok(if names.iter().any(|n| n == "fm_fresh") { Look::Done(()) } else { Look::not_yet(names) })
        })
        .await;
        assert_eq!(text(&call(&client, &cluster.replica_url(i), "fm_fresh", json!({})).await?), "grown");
    }

    // A replica started while the upstream is down serves its last known lists from the store,
    // and its calls fail fast with a tool error.
    fm.kill();
    let new = cluster.add_replica(&[])?;
    let url = cluster.replica_url(new);
    let names = tool_names(&modern(&client, &url, "tools/list", json!({}), false).await?);
    assert!(names.iter().any(|n| n == "fm_add") && names.iter().any(|n| n == "fm_fresh"), "{names:?}");
    let down = call(&client, &url, "fm_add", json!({"a": 1, "b": 1})).await?;
    assert_eq!(down["isError"], true, "{down}");
    assert!(text(&down).contains("Upstream fm"), "{down}");
    Ok(())
}

/// A stdio server slow to start (5 s before it reads its input, as with a first `npx -y`
/// download or a cold interpreter) that speaks 2026-07-28 reads the `server/discover` late,
/// after the `initialize` that followed it on the same pipe, and refuses that one (-32022):
/// mcpgate asks again and serves its tools, rather than restarting it into the same refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_slow_to_start_comes_up() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let (python, script) = (fastmcp_python()?, fixture("fastmcp_server.py"));
    let command = format!("sleep 5; exec '{}' '{}' stdio", python.display(), script.display());
    let config = format!(
        "[federation]\nlist_refresh_secs = 2\n\n[[upstream]]\nname = \"slow\"\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        serde_json::to_string(&command)?
    );
    let gateway = Gateway::builder()
        .args(&["--listen", "127.0.0.1:0", "--config", &config_file(dir.path(), &config)?])
        .start()?;
    let (client, url) = (Client::new()?, gateway.url());
    // The gateway's log is printed if this times out (it drops while panicking).
    wait_for("the slow server's tools to be served", Duration::from_secs(60), async || {
        let names = tool_names(&modern(&client, &url, "tools/list", json!({}), false).await?);
        Ok(if names.iter().any(|n| n == "slow_add") { Look::Done(()) } else { Look::not_yet(names) })
    })
    .await;
    assert_eq!(text(&call(&client, &url, "slow_add", json!({"a": 2, "b": 3})).await?), "5");
    let logs = gateway.logs();
    assert!(logs.lines().any(|l| l.contains("upstream server started") && l.contains("2026-07-28")), "{logs}");
    Ok(())
}

#[test]
fn configuration_errors_stop_start_up_naming_the_upstream_and_key() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for (body, expected) in [
        ("[[upstream]]\nname = \"Bad Name\"\ncommand = \"x\"\n", "name"),
        ("[[upstream]]\nname = \"files\"\n", "command"),
        (
            "[[upstream]]\nname = \"web\"\ntransport = \"http\"\nurl = \"https://x.example/mcp\"\nheaders = { Authorization = \"Bearer ${NOT_SET_ANYWHERE}\" }\n",
            "NOT_SET_ANYWHERE",
        ),
        ("[[upstream]]\nname = \"web\"\ntransport = \"http\"\nurl = \"https://x.example/mcp\"\ncolour = 1\n", "colour"),
        (
            "[[upstream]]\nname = \"local\"\ncommand = \"x\"\nheaders = { Authorization = \"Bearer hunter2-secret\" }\n",
            "headers",
        ),
    ] {
        let path = config_file(dir.path(), body)?;
        let (status, _, stderr) = run_to_end(&["--config", &path], &[])?;
        assert!(!status.success(), "started with {body}");
        assert!(stderr.contains(expected), "{expected:?} not named in: {stderr}");
        assert!(!stderr.contains("hunter2"), "a secret was printed: {stderr}");
    }
    let missing: PathBuf = dir.path().join("nope.json");
    let (status, _, stderr) = run_to_end(&["--mcp-servers", missing.to_string_lossy().as_ref()], &[])?;
    assert!(!status.success() && stderr.contains("nope.json"), "{stderr}");
    Ok(())
}
