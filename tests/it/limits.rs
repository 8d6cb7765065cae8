//! Rate limits through nginx in front of three replicas with Redis and JWT auth: the buckets
//! are shared by every replica (the balancer spreads one caller's requests over all three),
//! a caller over a limit gets 429 with `Retry-After` and an error naming the limit while
//! another caller's requests go through, a refused request costs nothing from the caller's
//! other limits, and polls past their burst are answered with a longer `pollIntervalMs` before
//! they are refused. Task quotas: a creation over a caller's running or retained quota is
//! refused clearly and creates nothing; an ended task frees its running place at once. With
//! Redis paused, a call that needs no Redis is admitted unchecked (and counted). An upstream's
//! limit counts every request that goes to it: prompts and resource reads as well as calls.

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, HttpServer, Reply, TaskPoll, Until};

const EXT: &str = "io.modelcontextprotocol/tasks";

async fn call(client: &Client, url: &str, sub: &str, method: &str, params: Value) -> anyhow::Result<Reply> {
    let auth = crate::jwt::bearer(sub)?;
    client.modern_with(url, &[("authorization", auth.as_str())], method, params).await
}

fn echo(text: &str) -> Value {
    json!({"name": "echo", "arguments": {"text": text}})
}

fn report() -> Value {
    json!({"name": "slow_report", "arguments": {"topic": "limits", "seconds": 60},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}})
}

fn poll(task: &str) -> Value {
    json!({"taskId": task, "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}})
}

/// The id of the task a `tools/call` reply created.
fn task_id(created: &Value) -> anyhow::Result<String> {
    created["result"]["taskId"]
        .as_str()
        .or_else(|| created["result"]["task"]["taskId"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no task: {created}"))
}

/// Asserts a 429 naming `limit`, with a `Retry-After` of 1 to `max_secs` seconds.
fn assert_limited(reply: &Reply, limit: &str, max_secs: u64) -> anyhow::Result<()> {
    anyhow::ensure!(reply.status == 429, "expected 429, got {}: {}", reply.status, reply.body);
    let retry: u64 = reply.retry_after.as_deref().unwrap_or_default().parse()?;
    anyhow::ensure!((1..=max_secs).contains(&retry), "Retry-After {retry} not in 1..={max_secs}");
    let error = &reply.json()?["error"];
    anyhow::ensure!(error["code"] == -32600, "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    anyhow::ensure!(message.contains(limit), "the message names the limit {limit:?}: {message}");
    anyhow::ensure!(error["data"]["retryAfterMs"].as_u64().is_some_and(|ms| ms <= max_secs * 1000), "{error}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_over_its_limit_gets_429_across_replicas_while_others_go_through() -> anyhow::Result<()> {
    let cluster = crate::jwt::with_jwt(Cluster::builder(3))
        .env("MCPGATE_LIMITS_CALLS_PER_MINUTE", "6")
        .env("MCPGATE_LIMITS_CALLS_BURST", "3")
        .env("MCPGATE_LIMITS_TASKS_PER_MINUTE", "1")
        .env("MCPGATE_LIMITS_TASKS_BURST", "1")
        .env("MCPGATE_LIMITS_POLLS_PER_MINUTE", "60")
        .env("MCPGATE_LIMITS_POLLS_BURST", "2")
        .env("MCPGATE_TASKS_POLL_INTERVAL_MS", "100")
        .start()?;
    let client = Client::new()?;
    let url = cluster.url();

    // Three calls at once are alice's burst, wherever the balancer sends them; the fourth
    // waits for the sustained rate (one call every 10 s).
    for i in 0..3 {
        let reply = call(&client, &url, "alice", "tools/call", echo(&format!("hi {i}"))).await?;
        anyhow::ensure!(reply.status == 200 && reply.json()?["result"].is_object(), "call {i}: {}", reply.body);
    }
    let refused = call(&client, &url, "alice", "tools/call", echo("one too many")).await?;
    assert_limited(&refused, "tool calls per caller", 10)?;
    // Bob is not alice.
    let bob = call(&client, &url, "bob", "tools/call", echo("bob")).await?;
    anyhow::ensure!(bob.status == 200 && bob.json()?["result"]["content"][0]["text"] == "bob", "{}", bob.body);

    // Carol may create one task a minute: the second is refused by the task limit, and
    // costs her nothing from her call limit (two calls are left of her burst of three).
    let created = call(&client, &url, "carol", "tools/call", report()).await?.json()?;
    let task = task_id(&created)?;
    let refused = call(&client, &url, "carol", "tools/call", report()).await?;
    assert_limited(&refused, "task creations per caller", 60)?;
    for i in 0..2 {
        let reply = call(&client, &url, "carol", "tools/call", echo("still fine")).await?;
        anyhow::ensure!(reply.status == 200, "carol's call {i}: {}", reply.body);
    }

    // Polls: two in time (the task's own interval), then two answered with advice to wait
    // (about 1 s and 2 s), then refused.
    let mut intervals = Vec::new();
    for _ in 0..4 {
        let reply = call(&client, &url, "carol", "tasks/get", poll(&task)).await?;
        let result = reply.json()?["result"].clone();
        anyhow::ensure!(result["status"] == "working", "{}", reply.body);
        intervals.push(result["pollIntervalMs"].as_u64().unwrap_or_default());
    }
    anyhow::ensure!(intervals[..2] == [100, 100], "in time, the task's own interval: {intervals:?}");
    anyhow::ensure!(intervals[2] > 500 && intervals[2] <= 1001, "advice of about 1 s: {intervals:?}");
    anyhow::ensure!(intervals[3] > 1500 && intervals[3] <= 2001, "advice of about 2 s: {intervals:?}");
    let refused = call(&client, &url, "carol", "tasks/get", poll(&task)).await?;
    assert_limited(&refused, "tasks/get polls per caller", 2)?;
    // Dave's polls are his own (his task lookup fails, as the task is carol's: not a 429).
    let dave = call(&client, &url, "dave", "tasks/get", poll(&task)).await?;
    anyhow::ensure!(dave.status == 200 && dave.json()?["error"]["code"] == -32602, "{}", dave.body);

    // Every refusal is counted by the replica that made it.
    let mut counted = 0.0;
    for i in 0..3 {
        let (_, metrics) = client.get(&format!("http://{}/metrics", cluster.replica(i).addr())).await?;
        counted += metrics
            .lines()
            .filter(|l| l.starts_with("mcpgate_rate_limited_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>();
    }
    anyhow::ensure!(counted == 3.0, "three refusals counted, got {counted}");
    let cancel = call(&client, &url, "carol", "tasks/cancel", poll(&task)).await?;
    anyhow::ensure!(cancel.status == 200, "{}", cancel.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_own_limit_counts_only_calls_to_its_tools() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let fm = HttpServer::fastmcp(dir.path())?;
    let config = dir.path().join("mcpgate.toml");
    std::fs::write(
        &config,
        format!(
            "toolset = [\"demo\"]\n[[upstream]]\nname = \"fm\"\ntransport = \"http\"\nurl = \"{}\"\n\
             [upstream.limits]\ncalls_per_minute = 6\ncalls_burst = 2\n",
            fm.url()
        ),
    )?;
    let cluster = crate::jwt::with_jwt(Cluster::builder(3)).args(&["--config", &config.to_string_lossy()]).start()?;
    let client = Client::new()?;
    let url = cluster.url();
    let add = json!({"name": "fm_add", "arguments": {"a": 2, "b": 3}});
    for i in 0..2 {
        let reply = call(&client, &url, "erin", "tools/call", add.clone()).await?;
        anyhow::ensure!(reply.json()?["result"]["content"][0]["text"] == "5", "call {i}: {}", reply.body);
    }
    let refused = call(&client, &url, "erin", "tools/call", add.clone()).await?;
    assert_limited(&refused, "calls to upstream fm per caller", 10)?;
    // The gateway's own tools are not that upstream's, and frank has his own budget.
    let echo = call(&client, &url, "erin", "tools/call", echo("mine")).await?;
    anyhow::ensure!(echo.status == 200 && echo.json()?["result"].is_object(), "{}", echo.body);
    let frank = call(&client, &url, "frank", "tools/call", add).await?;
    anyhow::ensure!(frank.json()?["result"]["content"][0]["text"] == "5", "{}", frank.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_limit_counts_its_prompts_and_resources_too() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let evh = HttpServer::everything()?;
    let config = dir.path().join("mcpgate.toml");
    std::fs::write(
        &config,
        format!(
            "[[upstream]]\nname = \"evh\"\ntransport = \"http\"\nurl = \"{}\"\n\
             [upstream.limits]\ncalls_per_minute = 6\ncalls_burst = 2\n",
            evh.url()
        ),
    )?;
    let cluster = crate::jwt::with_jwt(Cluster::builder(1)).args(&["--config", &config.to_string_lossy()]).start()?;
    let client = Client::new()?;
    let url = cluster.url();
    // Prompts of the upstream are requests to it: its limit counts them.
    let prompt = json!({"name": "evh_simple-prompt"});
    for i in 0..2 {
        let reply = call(&client, &url, "kim", "prompts/get", prompt.clone()).await?;
        anyhow::ensure!(reply.json()?["result"]["messages"].is_array(), "prompt {i}: {}", reply.body);
    }
    let refused = call(&client, &url, "kim", "prompts/get", prompt.clone()).await?;
    assert_limited(&refused, "calls to upstream evh per caller", 30)?;
    // So are reads of its resources, here by another caller with a budget of its own.
    let read = json!({"uri": "demo://resource/static/document/architecture.md"});
    for i in 0..2 {
        let reply = call(&client, &url, "lee", "resources/read", read.clone()).await?;
        anyhow::ensure!(reply.json()?["result"]["contents"].is_array(), "read {i}: {}", reply.body);
    }
    let refused = call(&client, &url, "lee", "resources/read", read).await?;
    assert_limited(&refused, "calls to upstream evh per caller", 30)?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_quotas_refuse_creations_clearly_until_tasks_end() -> anyhow::Result<()> {
    let mut cluster = crate::jwt::with_jwt(Cluster::builder(3))
        .env("MCPGATE_LIMITS_MAX_RUNNING_TASKS", "1")
        .env("MCPGATE_LIMITS_MAX_RETAINED_TASKS", "2")
        .start()?;
    let client = Client::new()?;
    let url = cluster.url();
    let first = task_id(&call(&client, &url, "gina", "tools/call", report()).await?.json()?)?;
    // One running task is gina's quota, whichever replica she reaches.
    let refused = call(&client, &url, "gina", "tools/call", report()).await?;
    anyhow::ensure!(refused.status == 429 && refused.retry_after.is_none(), "{refused:?}");
    let error = &refused.json()?["error"];
    anyhow::ensure!(error["code"] == -32600 && error["data"]["quota"] == "running tasks", "{error}");
    let message = error["message"].as_str().unwrap_or_default();
    anyhow::ensure!(message.contains("at most 1 running tasks per caller"), "{message}");
    // Hank's tasks are his own.
    let hank = call(&client, &url, "hank", "tools/call", report()).await?.json()?;
    let hanks = task_id(&hank)?;

    // Once her task ends, its place is free (on any replica).
    let cancelled = call(&client, &url, "gina", "tasks/cancel", poll(&first)).await?;
    anyhow::ensure!(cancelled.status == 200, "{}", cancelled.body);
    let second = task_id(&call(&client, &url, "gina", "tools/call", report()).await?.json()?)?;
    let cancelled = call(&client, &url, "gina", "tasks/cancel", poll(&second)).await?;
    anyhow::ensure!(cancelled.status == 200, "{}", cancelled.body);
    // Two retained tasks (both ended) fill her retained quota until the older expires.
    let refused = call(&client, &url, "gina", "tools/call", report()).await?;
    anyhow::ensure!(refused.status == 429, "{}", refused.body);
    let error = &refused.json()?["error"];
    anyhow::ensure!(error["data"]["quota"] == "retained tasks" && error["data"]["max"] == 2, "{error}");
    let retry: u64 = refused.retry_after.as_deref().unwrap_or_default().parse()?;
    // The default lifetime is an hour.
    anyhow::ensure!((3500..=3600).contains(&retry), "Retry-After {retry}: when the oldest task expires");
    // Nothing was created by the refused calls: gina's two tasks and hank's one are all.
    let redis_url = cluster.redis().url();
    let scan =
        std::process::Command::new("redis-cli").args(["-u", &redis_url, "--scan", "--pattern", "*:task:*"]).output()?;
    anyhow::ensure!(scan.status.success(), "redis-cli: {}", String::from_utf8_lossy(&scan.stderr));
    let stored = String::from_utf8_lossy(&scan.stdout).lines().count();
    anyhow::ensure!(stored == 3, "three task records stored, found {stored}");
    let cancelled = call(&client, &url, "hank", "tasks/cancel", poll(&hanks)).await?;
    anyhow::ensure!(cancelled.status == 200, "{}", cancelled.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stored_bytes_quota_counts_arguments_and_results() -> anyhow::Result<()> {
    let cluster = crate::jwt::with_jwt(Cluster::builder(3)).env("MCPGATE_LIMITS_MAX_STORED_BYTES", "2500").start()?;
    let client = Client::new()?;
    let url = cluster.url();
    // ~930 bytes of arguments; the report's result repeats the topic (~1 KB more).
    let report = |n: u32| {
        json!({"name": "slow_report", "arguments": {"topic": format!("{n}{}", "x".repeat(900)), "seconds": 1},
            "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}})
    };
    let first = task_id(&call(&client, &url, "ivy", "tools/call", report(1)).await?.json()?)?;
    let ivy = crate::jwt::bearer("ivy")?;
    TaskPoll::new(&client, &url).auth(&ivy).until(&first, Until::Status("completed")).await;
    // Arguments alone (2 × ~930) would fit in 2500; with the first result counted they do not.
    let refused = call(&client, &url, "ivy", "tools/call", report(2)).await?;
    anyhow::ensure!(refused.status == 429, "{}", refused.body);
    let error = &refused.json()?["error"];
    anyhow::ensure!(error["data"]["quota"] == "bytes stored in tasks" && error["data"]["max"] == 2500, "{error}");
    let retry: u64 = refused.retry_after.as_deref().unwrap_or_default().parse()?;
    anyhow::ensure!((3500..=3600).contains(&retry), "Retry-After {retry}: when the counted task expires");
    // Jack's bytes are his own.
    let jack = call(&client, &url, "jack", "tools/call", report(3)).await?;
    anyhow::ensure!(jack.status == 200 && task_id(&jack.json()?).is_ok(), "{}", jack.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_that_need_no_redis_go_through_while_the_limits_cannot_be_checked() -> anyhow::Result<()> {
    let mut cluster = crate::jwt::with_jwt(Cluster::builder(1))
        .env("MCPGATE_LIMITS_CALLS_PER_MINUTE", "600")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "300")
        .start()?;
    let client = Client::new()?;
    let url = cluster.url();
    cluster.redis().pause();
    let reply = call(&client, &url, "ivan", "tools/call", echo("no redis")).await;
    cluster.redis().resume();
    let reply = reply?;
    anyhow::ensure!(reply.json()?["result"]["content"][0]["text"] == "no redis", "admitted unchecked: {}", reply.body);
    let (_, metrics) = client.get(&format!("http://{}/metrics", cluster.replica(0).addr())).await?;
    anyhow::ensure!(metrics.contains("mcpgate_rate_limits_unchecked_total 1\n"), "counted as unchecked");
    Ok(())
}
