//! The whole deployment on a Redis Cluster (3 masters): replicas behind nginx create, run,
//! answer, cancel and take over tasks whose keys spread over the cluster's nodes, legacy
//! waiters are woken across nodes, and single-use requestState marks hold cluster-wide.

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, ClusterBuilder, Until, poll_task};

fn cluster(replicas: usize) -> ClusterBuilder {
    Cluster::builder(replicas)
        .redis_cluster(3)
        .env("MCPGATE_TOOLSET", "conformance,demo")
        .env("MCPGATE_TASKS_LEASE_MS", "2000")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "800")
}

async fn modern(client: &Client, url: &str, method: &str, mut params: Value, tasks: bool) -> anyhow::Result<Value> {
    let mut caps = json!({"elicitation": {}});
    if tasks {
        caps["extensions"] = json!({"io.modelcontextprotocol/tasks": {}});
    }
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": caps});
    Ok(client.modern(url, method, params).await?.json()?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_run_end_to_end_on_a_redis_cluster() -> anyhow::Result<()> {
    let mut cluster = cluster(3).env("MCPGATE_SEAL_REQUEST_STATE_SINGLE_USE", "true").start()?;
    let client = Client::new()?;
    let (a, b, c) = (cluster.replica_url(0), cluster.replica_url(1), cluster.replica_url(2));

    // Many tasks, so their shards (and slots) spread over every node; each created on one
    // replica and read on another.
    let mut ids = Vec::new();
    for n in 0..24 {
        let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": format!("n{n}")}});
        let created = modern(&client, &a, "tools/call", call, true).await?;
        ids.push(created["result"]["taskId"].as_str().expect("a task").to_owned());
    }
    let shards: std::collections::BTreeSet<&str> = ids.iter().map(|id| &id[1..3]).collect();
    assert!(shards.len() >= 6, "tasks spread over shards: {shards:?}");
    for (n, id) in ids.iter().enumerate() {
        let done = poll_task(&client, &b, id, Until::Terminal).await;
        assert_eq!(done["result"]["content"][0]["text"], format!("Computed n{n} in 0.2 s"));
    }

    // Input on one replica, answered on another, resumed anywhere.
    let created =
        modern(&client, &a, "tools/call", json!({"name": "confirm_delete", "arguments": {"filename": "f"}}), true)
            .await?;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    poll_task(&client, &b, &id, Until::Status("input_required")).await;
    let answer =
        json!({"taskId": id, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    modern(&client, &c, "tasks/update", answer, true).await?;
    assert_eq!(poll_task(&client, &a, &id, Until::Terminal).await["result"]["content"][0]["text"], "Deleted f");

    // Cancel from another replica.
    let created =
        modern(&client, &a, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 60}}), true).await?;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    modern(&client, &c, "tasks/cancel", json!({"taskId": id}), true).await?;
    assert_eq!(poll_task(&client, &b, &id, Until::Terminal).await["status"], "cancelled");

    // A legacy waiter on one replica, woken by completion on another node's shard.
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let session = client.legacy(&b, "initialize", init, None).await?.session.expect("a session");
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.3}, "task": {}});
    let created = client.legacy(&c, "tools/call", call, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().expect("a task").to_owned();
    let result = client.legacy(&b, "tasks/result", json!({"taskId": id}), Some(&session)).await?;
    assert_eq!(result.events()?.last().expect("final")["result"]["content"][0]["text"], "Computed result in 0.3 s");

    // Single-use requestState: the replay on another replica is refused.
    let args = json!({"table": "t", "older_than_days": 1});
    let r1 = modern(&client, &a, "tools/call", json!({"name": "delete_records", "arguments": args}), false).await?;
    let state = r1["result"]["requestState"].as_str().expect("a state").to_owned();
    let retry = json!({"name": "delete_records", "arguments": args, "requestState": state,
        "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
    let ok = modern(&client, &b, "tools/call", retry.clone(), false).await?;
    assert!(ok["result"]["content"][0]["text"].as_str().unwrap_or_default().starts_with("Deleted "), "{ok}");
    let replay = modern(&client, &c, "tools/call", retry, false).await?;
    assert_eq!(replay["error"]["message"], "Invalid params: invalid requestState", "{replay}");

    // A replica killed mid-task: another takes it over.
    let created =
        modern(&client, &a, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 2}}), true).await?;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    let survivor = cluster.replica_url((victim + 1) % 3);
    assert_eq!(poll_task(&client, &survivor, &id, Until::Terminal).await["status"], "completed");
    Ok(())
}
