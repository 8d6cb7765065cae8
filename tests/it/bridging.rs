//! Era bridging through the gateway, through nginx in front of three replicas: a 2026-07-28
//! upstream (mcpgate itself, serving the conformance fixtures) that asks for input mid-call,
//! used by a modern client (its rounds relayed, each retry on another replica) and by a legacy
//! client inside a task (the round parks the task; the client answers on another replica).

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Gateway, HttpServer, Look, PATIENCE, eventually, wait_for};

/// A modern request declaring form elicitation.
async fn asking(client: &Client, url: &str, mut params: Value) -> anyhow::Result<Value> {
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    Ok(client.modern(url, "tools/call", params).await?.json()?)
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_input_requests_reach_clients_of_both_eras() -> anyhow::Result<()> {
    let inner = Gateway::builder().args(&["--listen", "127.0.0.1:0", "--toolset", "conformance"]).start()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mcpgate.toml");
    std::fs::write(&config, format!("[[upstream]]\nname = \"in\"\ntransport = \"http\"\nurl = \"{}\"\n", inner.url()))?;
    let cluster = Cluster::builder(3).args(&["--config", &config.to_string_lossy()]).start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let tool = "in_test_input_required_result_multi_round";

    // Modern: two rounds, each answered on another replica.
    let first = asking(&client, &url(0), json!({"name": tool, "arguments": {}})).await?;
    let round = &first["result"];
    assert_eq!(round["resultType"], "input_required", "{first}");
    assert_eq!(round["inputRequests"]["step1"]["method"], "elicitation/create", "{first}");
    let state = round["requestState"].as_str().expect("a sealed state").to_owned();
    let retry = json!({
        "name": tool, "arguments": {},
        "inputResponses": {"step1": accept(json!({"name": "Ada"}))},
        "requestState": state,
    });
    let second = asking(&client, &url(1), retry).await?;
    let round = &second["result"];
    assert_eq!(round["resultType"], "input_required", "{second}");
    // A later round's keys are the gateway's own (an upstream may reuse keys across rounds).
    let asked = round["inputRequests"].as_object().expect("input requests");
    assert_eq!(asked.keys().collect::<Vec<_>>(), ["step2.r2"], "{second}");
    assert!(asked["step2.r2"]["params"]["message"].as_str().unwrap_or_default().contains("Ada"));
    let state2 = round["requestState"].as_str().expect("a sealed state").to_owned();

    // The gateway's state is sealed: a tampered one is refused, not passed upstream.
    let mut tampered = state2.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let forged = json!({
        "name": tool, "arguments": {},
        "inputResponses": {"step2.r2": accept(json!({"color": "red"}))},
        "requestState": String::from_utf8(tampered)?,
    });
    let refused = asking(&client, &url(2), forged).await?;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    let done = json!({
        "name": tool, "arguments": {},
        "inputResponses": {"step2.r2": accept(json!({"color": "green"}))},
        "requestState": state2,
    });
    let done = asking(&client, &url(2), done).await?;
    assert_eq!(done["result"]["content"][0]["text"], "Ada likes green", "{done}");

    // Legacy, a plain call: each round's question comes on the call's own stream as a
    // server→client request; the answers are POSTed to other replicas and relayed back.
    let init = json!({
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "e2e", "version": "1"},
    });
    let session = client.legacy(&url(0), "initialize", init, None).await?.session.expect("a session");
    let call = json!({"name": tool, "arguments": {}});
    let mut stream = client.legacy_stream(&url(0), "tools/call", call, &session).await?;
    for (i, content) in [json!({"name": "Lin"}), json!({"color": "blue"})].into_iter().enumerate() {
        let request = stream.next(Duration::from_secs(20)).await?.expect("a question on the stream");
        assert_eq!(request["method"], "elicitation/create", "{request}");
        let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": accept(content)});
        let posted = client.legacy_message(&url(1 + i), &session, &[], &answer).await?;
        assert_eq!(posted.status, 202, "{}", posted.body);
    }
    let last = stream.next(Duration::from_secs(20)).await?.expect("the call's result");
    assert_eq!(last["id"], 1, "{last}");
    assert_eq!(last["result"]["content"][0]["text"], "Lin likes blue", "{last}");

    // Legacy: inside a task, the upstream's round parks the task; the answer lands elsewhere.
    let init = json!({
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "e2e", "version": "1"},
    });
    let session = client.legacy(&url(0), "initialize", init, None).await?.session.expect("a session");
    let call = json!({"name": "in_test_input_required_result_elicitation", "arguments": {}, "task": {}});
    let created = client.legacy(&url(0), "tools/call", call, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let mut stream = client.legacy_stream(&url(1), "tasks/result", json!({"taskId": id}), &session).await?;
    let request = stream.next(Duration::from_secs(20)).await?.expect("an input request");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": accept(json!({"name": "Grace"}))});
    let posted = client.legacy_message(&url(2), &session, &[], &answer).await?;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let last = stream.next_result(Duration::from_secs(20)).await?;
    assert_eq!(last["result"]["content"][0]["text"], "Hello, Grace!", "{last}");
    Ok(())
}

/// Polls `tasks/get` (with `meta`, the client's capabilities) on `urls` in turn, handing each
/// task read to `seen`, until it returns true; returns that read.
async fn poll_task(
    client: &Client,
    urls: &[String],
    id: &str,
    meta: &Value,
    mut seen: impl FnMut(&Value) -> bool,
) -> anyhow::Result<Value> {
    let mut turn = 0;
    Ok(wait_for(format!("task {id} to get there"), PATIENCE, async || {
        let url = &urls[turn % urls.len()];
        turn += 1;
        let got = client.modern(url, "tasks/get", json!({"taskId": id, "_meta": meta})).await?.json()?;
        Ok(if seen(&got["result"]) { Look::Done(got) } else { Look::not_yet(got) })
    })
    .await)
}

fn finished(task: &Value) -> bool {
    ["completed", "failed", "cancelled"].iter().any(|s| task["status"] == *s)
}

/// `mcpgate_tasks_total{tool, event}` of a replica (the upstream mcpgate here).
async fn task_events(client: &Client, gateway: &Gateway, tool: &str, event: &str) -> anyhow::Result<u64> {
    let (_, text) = client.get(&format!("http://{}/metrics", gateway.addr())).await?;
    let line = format!("mcpgate_tasks_total{{tool=\"{tool}\",event=\"{event}\"}} ");
    Ok(text.lines().find_map(|l| l.strip_prefix(&line)).and_then(|n| n.parse().ok()).unwrap_or(0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstreams_tasks_are_wrapped_for_clients_of_both_eras() -> anyhow::Result<()> {
    // The upstream: mcpgate itself (2026-07-28, tasks extension), one process any replica reaches.
    let inner = Gateway::builder().args(&["--listen", "127.0.0.1:0", "--toolset", "conformance"]).start()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mcpgate.toml");
    let table =
        format!("[[upstream]]\nname = \"in\"\ntransport = \"http\"\nurl = \"{}\"\ntask = \"optional\"\n", inner.url());
    std::fs::write(&config, table)?;
    let mut cluster = Cluster::builder(3)
        .env("MCPGATE_TASKS_LEASE_MS", "1500")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "750")
        .args(&["--config", &config.to_string_lossy()])
        .start()?;
    let client = Client::new()?;
    let urls: Vec<String> = (0..3).map(|i| cluster.replica_url(i)).collect();
    let url = |i: usize| urls[i].clone();

    // A 2025-11-25 client: the upstream task asks for input, answered on another replica.
    let init = json!({
        "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "e2e", "version": "1"},
    });
    let session = client.legacy(&url(0), "initialize", init, None).await?.session.expect("a session");
    let call = json!({"name": "in_confirm_delete", "arguments": {"filename": "a.txt"}, "task": {}});
    let created = client.legacy(&url(0), "tools/call", call, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let mut stream = client.legacy_stream(&url(1), "tasks/result", json!({"taskId": id}), &session).await?;
    let request = stream.next(Duration::from_secs(20)).await?.expect("an input request");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert!(request["params"]["message"].as_str().unwrap_or_default().contains("a.txt"), "{request}");
    assert_eq!(task_events(&client, &inner, "confirm_delete", "created").await?, 1, "the upstream made a task");
    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": accept(json!({"confirm": true}))});
    let posted = client.legacy_message(&url(2), &session, &[], &answer).await?;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let last = stream.next_result(Duration::from_secs(20)).await?;
    assert_eq!(last["result"]["content"][0]["text"], "Deleted a.txt", "{last}");
    let got = client.legacy(&url(0), "tasks/get", json!({"taskId": id}), Some(&session)).await?.json()?;
    assert_eq!(got["result"]["status"], "completed", "{got}");

    // Cancelling the gateway task (on any replica) cancels the upstream task.
    let call = json!({"name": "in_slow_compute", "arguments": {"seconds": 60}, "task": {}});
    let created = client.legacy(&url(1), "tools/call", call, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    eventually!(task_events(&client, &inner, "slow_compute", "created").await? == 1, "the upstream task");
    let cancelled = client.legacy(&url(2), "tasks/cancel", json!({"taskId": id}), Some(&session)).await?.json()?;
    assert_eq!(cancelled["result"]["status"], "cancelled", "{cancelled}");
    eventually!(task_events(&client, &inner, "slow_compute", "cancelled").await? == 1, "the upstream cancel");

    // A task-required upstream tool, called synchronously by a client without the extension.
    let failed = client.modern(&url(0), "tools/call", json!({"name": "in_failing_job", "arguments": {}})).await?;
    let failed = failed.json()?;
    assert_eq!(failed["result"]["isError"], true, "{failed}");
    assert_eq!(failed["result"]["content"][0]["text"], "The job failed: the input data was rejected", "{failed}");

    // A replica dying while it tracks an upstream task: another resumes tracking; the upstream
    // call is not made again (slow_compute is not idempotent).
    let ext =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let call = json!({"name": "in_slow_compute", "arguments": {"seconds": 4}, "_meta": ext});
    let lb = cluster.url();
    let created = client.modern(&lb, "tools/call", call).await?.json()?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    eventually!(task_events(&client, &inner, "slow_compute", "created").await? == 2, "the second upstream task");
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    let survivor = url((victim + 1) % 3);
    let done = poll_task(&client, &[survivor], &id, &ext, finished).await?;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(done["result"]["result"]["content"][0]["text"].is_string(), "{done}");
    assert_eq!(task_events(&client, &inner, "slow_compute", "created").await?, 2, "the upstream call ran once");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_upstreams_task_required_tool_serves_modern_clients() -> anyhow::Result<()> {
    // The reference server-everything (2025-11-25, Streamable HTTP): `simulate-research-query`
    // runs only as a task (`taskSupport: required`), through stages with status messages.
    let evh = HttpServer::everything()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mcpgate.toml");
    let table =
        format!("[[upstream]]\nname = \"ev\"\ntransport = \"http\"\nurl = \"{}\"\ntask = \"optional\"\n", evh.url());
    std::fs::write(&config, table)?;
    // server-everything registers this tool only once the session is initialized (and announces
    // it then): lists are re-read every second so no replica keeps a list read before that.
    let cluster = Cluster::builder(3)
        .env("MCPGATE_FEDERATION_LIST_REFRESH_SECS", "1")
        .args(&["--config", &config.to_string_lossy()])
        .start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let tool = "ev_simulate-research-query";
    for i in 0..3 {
        wait_for(format!("replica {i} to list {tool}"), PATIENCE, async || {
            let list = client.modern(&url(i), "tools/list", json!({})).await?.json()?;
            let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
            Ok(if tools.iter().any(|t| t["name"] == tool) { Look::Done(()) } else { Look::not_yet(list) })
        })
        .await;
    }

    // A synchronous call from a client without tasks: the gateway tracks the upstream task.
    let sync = client.modern(&url(0), "tools/call", json!({"name": tool, "arguments": {"topic": "otters"}})).await?;
    let sync = sync.json()?;
    assert_ne!(sync["result"]["isError"], true, "{sync}");
    let report = sync["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(report.contains("Research Report: otters"), "{sync}");

    // A modern client with tasks: a gateway task, read on every replica, its status messages
    // relayed from the upstream's.
    let ext =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let call = json!({"name": tool, "arguments": {"topic": "badgers"}, "_meta": ext});
    let created = client.modern(&url(1), "tools/call", call).await?.json()?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let mut messages = std::collections::BTreeSet::new();
    let every: Vec<String> = (0..3).map(url).collect();
    let done = poll_task(&client, &every, &id, &ext, |task| {
        if let Some(message) = task["statusMessage"].as_str() {
            messages.insert(message.to_owned());
        }
        task["status"] != "working"
    })
    .await?;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let report = done["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(report.contains("Research Report: badgers"), "{done}");
    assert!(messages.iter().any(|m| m.contains("...")), "upstream stage messages relayed: {messages:?}");

    // The upstream task asks a question (on its tasks/result stream): the gateway task shows it,
    // the client answers on another replica, the upstream task goes on and completes.
    let asking = json!({"io.modelcontextprotocol/clientCapabilities": {
        "extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {},
    }});
    let call = json!({"name": tool, "arguments": {"topic": "python", "ambiguous": true}, "_meta": asking});
    let created = client.modern(&url(0), "tools/call", call).await?.json()?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let asked = poll_task(&client, &[url(1)], &id, &asking, |task| {
        assert!(task["status"] == "working" || task["status"] == "input_required", "{task}");
        task["status"] == "input_required"
    })
    .await?;
    let requests = asked["result"]["inputRequests"].as_object().expect("input requests").clone();
    let (key, request) = requests.iter().next().expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{asked}");
    let schema = &request["params"]["requestedSchema"]["properties"]["interpretation"];
    let choice = schema["oneOf"][0]["const"].as_str().unwrap_or("programming language").to_owned();
    let answer = json!({"taskId": id, "inputResponses": {key.as_str(): accept(json!({"interpretation": choice}))}, "_meta": asking});
    let updated = client.modern(&url(2), "tasks/update", answer).await?.json()?;
    assert!(updated.get("error").is_none(), "{updated}");
    let done = poll_task(&client, &[url(0)], &id, &asking, finished).await?;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    let report = done["result"]["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(report.contains(&format!("Clarification**: {choice}")), "the answer reached the upstream: {done}");

    // Cancelled on another replica: the gateway task ends cancelled.
    let call = json!({"name": tool, "arguments": {"topic": "moles"}, "_meta": ext});
    let created = client.modern(&url(2), "tools/call", call).await?.json()?;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let cancelled = client.modern(&url(0), "tasks/cancel", json!({"taskId": id, "_meta": ext})).await?.json()?;
    assert!(cancelled.get("error").is_none(), "{cancelled}");
    let got = client.modern(&url(1), "tasks/get", json!({"taskId": id, "_meta": ext})).await?.json()?;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    Ok(())
}
