//! Tasks across replicas: Redis + several `mcpgate` processes + nginx, with each step of a
//! flow sent to a different replica, a replica killed mid-task, and principals isolated.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, ClusterBuilder, Look, PATIENCE, Until, poll_task, wait_for};

const EXT: &str = "io.modelcontextprotocol/tasks";

fn ext() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}})
}

/// A cluster serving the conformance fixtures (`slow_compute` and friends).
fn cluster(replicas: usize) -> ClusterBuilder {
    Cluster::builder(replicas).env("MCPGATE_TOOLSET", "conformance")
}

/// A modern request declaring the tasks extension.
async fn modern(client: &Client, url: &str, method: &str, mut params: Value) -> anyhow::Result<Value> {
    params["_meta"] = ext();
    let reply = client.modern(url, method, params).await?;
    Ok(reply.json()?)
}

async fn legacy_session(client: &Client, url: &str) -> anyhow::Result<String> {
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let reply = client.legacy(url, "initialize", init, None).await?;
    Ok(reply.session.expect("a session id"))
}

fn task_id(created: &Value) -> String {
    created["result"]["taskId"]
        .as_str()
        .or_else(|| created["result"]["task"]["taskId"].as_str())
        .expect("a task id")
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_step_of_a_flow_on_a_different_replica() -> anyhow::Result<()> {
    // A 90 s lease is first renewed after 30 s: a run that stops before then heard the cancel.
    let cluster = cluster(4).env("MCPGATE_TASKS_LEASE_MS", "90000").start()?;
    let client = Client::new()?;
    let [a, b, c, d] = [0, 1, 2, 3].map(|i| cluster.replica_url(i));

    // Modern: create on A, get on B and C, cancel (a finished task: still an ack) on D.
    let created =
        modern(&client, &a, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 0.5}})).await?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = task_id(&created);
    let seen = modern(&client, &b, "tasks/get", json!({"taskId": id})).await?;
    assert_eq!(seen["result"]["taskId"], id.as_str(), "durable before the create answered: {seen}");
    let done = poll_task(&client, &c, &id, Until::Terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "Computed result in 0.5 s");
    let ack = modern(&client, &d, "tasks/cancel", json!({"taskId": id})).await?;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");

    // Modern cancel: create on A, see it working on B, cancel on C, cancelled on D.
    let created =
        modern(&client, &a, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 60}})).await?;
    let id = task_id(&created);
    assert_eq!(modern(&client, &b, "tasks/get", json!({"taskId": id})).await?["result"]["status"], "working");
    cluster.executing_replica_soon(&client).await?;
    modern(&client, &c, "tasks/cancel", json!({"taskId": id})).await?;
    assert_eq!(poll_task(&client, &d, &id, Until::Terminal).await["status"], "cancelled");
    // The executing replica stops the tool (it heard the cancel event).
    no_replica_runs_soon(&client, &cluster).await;

    // Legacy: session from A, task on B, get on C, blocking result on D, refused cancel on A.
    let session = legacy_session(&client, &a).await?;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.5}, "task": {"ttl": 60_000}});
    let created = client.legacy(&b, "tools/call", call, Some(&session)).await?.json()?;
    let id = task_id(&created);
    let got = client.legacy(&c, "tasks/get", json!({"taskId": id}), Some(&session)).await?.json()?;
    assert_eq!(got["result"]["taskId"], id.as_str(), "{got}");
    let result = client.legacy(&d, "tasks/result", json!({"taskId": id}), Some(&session)).await?;
    let events = result.events()?;
    let last = events.last().expect("final event");
    assert_eq!(last["result"]["content"][0]["text"], "Computed result in 0.5 s", "{events:?}");
    assert_eq!(last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    let refused = client.legacy(&a, "tasks/cancel", json!({"taskId": id}), Some(&session)).await?.json()?;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocking_tasks_result_is_woken_by_completion_on_another_replica() -> anyhow::Result<()> {
    // Replica 0 runs no tasks, so the completion it waits for surely happens elsewhere.
    let cluster = cluster(3).replica_env(0, "MCPGATE_TASKS_MAX_RUNNING", "0").start()?;
    let client = Client::new()?;
    let waiter = cluster.replica_url(0);
    let session = legacy_session(&client, &waiter).await?;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 1.5}, "task": {}});
    let id = task_id(&client.legacy(&waiter, "tools/call", call, Some(&session)).await?.json()?);
    // The waiter reads the task again on its own only every 30 s: an answer before then was
    // woken by the completion event.
    let result = tokio::time::timeout(
        Duration::from_secs(25),
        client.legacy(&waiter, "tasks/result", json!({"taskId": id}), Some(&session)),
    )
    .await
    .map_err(|_| anyhow::anyhow!("tasks/result not woken by the completion on another replica"))??;
    let events = result.events()?;
    assert_eq!(events.last().expect("final")["result"]["content"][0]["text"], "Computed result in 1.5 s");
    Ok(())
}

/// Waits until no replica runs a task: within 20 s, before the first renewal of a 90 s lease
/// (at 30 s) could have told the run to stop.
async fn no_replica_runs_soon(client: &Client, cluster: &Cluster) {
    wait_for("no replica to run the task", Duration::from_secs(20), async || {
        Ok(match cluster.executing_replica(client).await? {
            Some(i) => Look::NotYet(format!("replica {i} runs it")),
            None => Look::Done(()),
        })
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_executing_replica_loses_no_task() -> anyhow::Result<()> {
    let mut cluster =
        cluster(3).env("MCPGATE_TASKS_LEASE_MS", "1500").env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "750").start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let created =
        modern(&client, &lb, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 3}})).await?;
    let id = task_id(&created);
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    // Another replica reclaims the job once the lease lapsed and runs it again.
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Computed result in 3 s");
    // The takeover shows in the survivors' metrics, as do their Redis calls.
    let mut reclaimed = 0;
    for replica in cluster.replicas.iter().flatten() {
        let (_, text) = client.get(&format!("http://{}/metrics", replica.addr())).await?;
        reclaimed += text
            .lines()
            .find_map(|l| l.strip_prefix("mcpgate_tasks_total{tool=\"slow_compute\",event=\"reclaimed\"} "))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
        assert!(text.contains("mcpgate_redis_call_duration_seconds_count "), "{text}");
        assert!(text.contains("mcpgate_task_queue_depth "), "{text}");
    }
    assert_eq!(reclaimed, 1, "one replica took the task over");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_shutting_down_hands_its_task_over() -> anyhow::Result<()> {
    // One attempt allowed and a 30 s lease: only a handover (not a lapsed lease, which would
    // also spend the only attempt) lets another replica finish the task in time.
    let mut cluster =
        cluster(3).env("MCPGATE_TASKS_MAX_ATTEMPTS", "1").env("MCPGATE_SHUTDOWN_GRACE_SECS", "1").start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let created =
        modern(&client, &lb, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 4}})).await?;
    let id = task_id(&created);
    let leaving = cluster.executing_replica_soon(&client).await?;
    let replica = cluster.replicas[leaving].as_mut().expect("running");
    replica.terminate()?;
    let status = replica.wait(Duration::from_secs(15))?;
    assert!(status.success(), "graceful exit: {status}");
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Computed result in 4 s");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_never_outlives_its_attempts() -> anyhow::Result<()> {
    // With one attempt allowed, a killed run ends the task as failed with a clear error.
    let mut cluster = cluster(2)
        .env("MCPGATE_TASKS_LEASE_MS", "1000")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "500")
        .env("MCPGATE_TASKS_MAX_ATTEMPTS", "1")
        .start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let created =
        modern(&client, &lb, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 30}})).await?;
    let id = task_id(&created);
    let victim = cluster.executing_replica_soon(&client).await?;
    cluster.kill(victim);
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "failed", "{done}");
    assert!(done["error"]["message"].as_str().unwrap_or_default().contains("stopped before finishing"), "{done}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_principal_cannot_reach_a_task_on_any_replica() -> anyhow::Result<()> {
    let cluster = crate::jwt::with_jwt(cluster(3)).start()?;
    let (alice, bob) = (crate::jwt::bearer("alice")?, crate::jwt::bearer("bob")?);
    let client = Client::new()?;
    let call = |url: String, auth: String, method: &'static str, params: Value| {
        let client = client.clone();
        async move {
            let mut params = params;
            params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
            let reply = client.modern_with(&url, &[("authorization", auth.as_str())], method, params).await?;
            anyhow::Ok(reply.json()?)
        }
    };
    let created = call(
        cluster.replica_url(0),
        alice.clone(),
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30}}),
    )
    .await?;
    let id = task_id(&created);
    for i in 0..3 {
        let theirs = call(cluster.replica_url(i), bob.clone(), "tasks/get", json!({"taskId": id})).await?;
        assert_eq!(theirs["error"]["code"], -32602, "replica {i}: {theirs}");
        let cancel = call(cluster.replica_url(i), bob.clone(), "tasks/cancel", json!({"taskId": id})).await?;
        assert_eq!(cancel["error"]["code"], -32602, "replica {i}: {cancel}");
    }
    let mine = call(cluster.replica_url(2), alice, "tasks/get", json!({"taskId": id})).await?;
    assert_eq!(mine["result"]["status"], "working", "{mine}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_expire_on_every_replica() -> anyhow::Result<()> {
    // A 90 s lease is first renewed after 30 s, and the run lasts 120 s: a run that stops
    // before either heard of the expiry.
    let cluster = cluster(2)
        .env("MCPGATE_TASKS_DEFAULT_TTL_MS", "1000")
        .env("MCPGATE_TASKS_MAX_TTL_MS", "1000")
        .env("MCPGATE_TASKS_LEASE_MS", "90000")
        .start()?;
    let client = Client::new()?;
    let created = modern(
        &client,
        &cluster.replica_url(0),
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 120}}),
    )
    .await?;
    assert_eq!(created["result"]["ttlMs"], 1000, "{created}");
    let id = task_id(&created);
    cluster.executing_replica_soon(&client).await?;
    for i in 0..2 {
        wait_for(format!("task {id} to expire on replica {i}"), PATIENCE, async || {
            let gone = modern(&client, &cluster.replica_url(i), "tasks/get", json!({"taskId": id})).await?;
            Ok(if gone["error"]["code"] == -32602 { Look::Done(()) } else { Look::not_yet(gone) })
        })
        .await;
    }
    // The run of the expired task stops too (long before its next lease renewal).
    no_replica_runs_soon(&client, &cluster).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_whole_legacy_session_through_the_load_balancer() -> anyhow::Result<()> {
    let cluster = cluster(3).start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let session = legacy_session(&client, &lb).await?;
    for _ in 0..3 {
        let tools = client.legacy(&lb, "tools/list", json!({}), Some(&session)).await?.json()?;
        assert!(tools["result"]["tools"].is_array(), "{tools}");
    }
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.2}, "task": {}});
    let id = task_id(&client.legacy(&lb, "tools/call", call, Some(&session)).await?.json()?);
    let result = client.legacy(&lb, "tasks/result", json!({"taskId": id}), Some(&session)).await?;
    assert_eq!(result.events()?.last().expect("final")["result"]["content"][0]["text"], "Computed result in 0.2 s");
    Ok(())
}

/// A rolling upgrade adds a tool: a replica of the old release reads the new tool's job, leaves
/// it for another replica instead of failing the task, and a replica that knows the tool runs
/// it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_for_an_unknown_tool_completes_on_a_replica_that_knows_it() -> anyhow::Result<()> {
    // Replica 0 knows the tool but runs no tasks; replica 1 (the "old release") does not
    // know it and runs tasks.
    let mut cluster = Cluster::builder(2)
        .env("MCPGATE_TOOLSET", "conformance")
        .replica_env(0, "MCPGATE_TASKS_MAX_RUNNING", "0")
        .replica_env(1, "MCPGATE_TOOLSET", "demo")
        .start()?;
    let client = Client::new()?;
    let created = modern(
        &client,
        &cluster.replica_url(0),
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0, "label": "upgrade"}}),
    )
    .await?;
    let id = task_id(&created);
    // The old replica passes it round (a deferral every half second) without failing it: it
    // has deferred it three times, and the task still works.
    wait_for("replica 1 to defer the job three times", PATIENCE, async || {
        let deferrals = cluster.replica(1).logs().matches("tool unknown here").count();
        Ok(if deferrals >= 3 { Look::Done(()) } else { Look::not_yet(deferrals) })
    })
    .await;
    let waiting = modern(&client, &cluster.replica_url(0), "tasks/get", json!({"taskId": id})).await?;
    assert_eq!(waiting["result"]["status"], "working", "not failed while no replica could run it: {waiting}");
    // The new release arrives: it runs the task.
    cluster.add_replica(&[("MCPGATE_TOOLSET", "conformance")])?;
    let done = poll_task(&client, &cluster.replica_url(0), &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "Computed upgrade in 0 s", "{done}");
    Ok(())
}
