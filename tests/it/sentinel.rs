//! The deployment on Redis Sentinel (a primary, two replicas, three sentinels): two gateway
//! replicas that know only the sentinels create a task on one and read it on the other, and
//! keep doing so after the primary is `kill -9`ed and a replica promoted.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Look, PATIENCE, Until, poll_task, wait_for};

async fn create_task(client: &Client, url: &str, label: &str) -> anyhow::Result<String> {
    let params = json!({
        "name": "slow_compute",
        "arguments": {"seconds": 0.2, "label": label},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}},
    });
    let created: Value = client.modern(url, "tools/call", params).await?.json()?;
    created["result"]["taskId"].as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no task: {created}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_behind_sentinel_share_tasks_and_follow_a_failover() -> anyhow::Result<()> {
    let mut cluster = Cluster::builder(2)
        .redis_sentinel()
        .env("MCPGATE_TOOLSET", "conformance,demo")
        .env("MCPGATE_TASKS_LEASE_MS", "2000")
        .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "800")
        .start()?;
    let client = Client::new()?;
    let (a, b) = (cluster.replica_url(0), cluster.replica_url(1));

    let id = create_task(&client, &a, "before").await?;
    let done = poll_task(&client, &b, &id, Until::Terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "Computed before in 0.2 s");

    let set = cluster.redis_sentinel().expect("a Sentinel set");
    set.kill_primary();
    set.wait_for_new_primary(Duration::from_secs(20));
    // Creating fails (a retryable error) until the replicas reach the new primary.
    let id = wait_for("a task created after the failover", PATIENCE, async || {
        Ok(match create_task(&client, &a, "after").await {
            Ok(id) => Look::Done(id),
            Err(e) => Look::not_yet(e.to_string()),
        })
    })
    .await;
    let done = poll_task(&client, &b, &id, Until::Terminal).await;
    assert_eq!(done["result"]["content"][0]["text"], "Computed after in 0.2 s");
    Ok(())
}
