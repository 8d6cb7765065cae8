//! The admin API against a running fleet (three replicas behind nginx, Redis, JWT auth),
//! driven through the `mcpgate admin` command: listing every owner's tasks by owner (the
//! token's subject, optionally with its issuer; listings show both), status and tool;
//! inspecting one without its payloads; cancelling another principal's running task (its owner
//! sees it cancelled); purging only ended tasks, by owner too; draining one replica (it claims
//! no new jobs while a task it was running finishes) and undraining it. A wrong token gets 401.

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, TaskPoll, Until, run_to_end};

const EXT: &str = "io.modelcontextprotocol/tasks";
const TOKEN: &str = "admin-token-for-the-e2e-fleet-0123456789";

/// `mcpgate admin --url <replica's admin API> <args>`: its JSON output, or an error with its
/// stderr.
fn admin(url: &str, token: &str, args: &[&str]) -> anyhow::Result<Value> {
    let mut all = vec!["admin", "--url", url];
    all.extend_from_slice(args);
    let (status, stdout, stderr) = run_to_end(&all, &[("MCPGATE_ADMIN_TOKEN", token)])?;
    anyhow::ensure!(status.success(), "mcpgate admin {args:?}: {status}: {stderr}");
    Ok(serde_json::from_str(&stdout)?)
}

fn ids(listing: &Value) -> Vec<String> {
    let mut ids: Vec<String> = listing["tasks"]
        .as_array()
        .map(|tasks| tasks.iter().filter_map(|t| t["taskId"].as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    ids.sort();
    ids
}

async fn report(client: &Client, url: &str, sub: &str, seconds: u64) -> anyhow::Result<String> {
    let auth = crate::jwt::bearer(sub)?;
    let params = json!({"name": "slow_report", "arguments": {"topic": "secret-topic", "seconds": seconds},
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}});
    let created = client.modern_with(url, &[("authorization", auth.as_str())], "tools/call", params).await?.json()?;
    created["result"]["taskId"].as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no task: {created}"))
}

async fn status_of(client: &Client, url: &str, sub: &str, id: &str) -> anyhow::Result<String> {
    let auth = crate::jwt::bearer(sub)?;
    let params =
        json!({"taskId": id, "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}}});
    let got = client.modern_with(url, &[("authorization", auth.as_str())], "tasks/get", params).await?.json()?;
    got["result"]["status"].as_str().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no status: {got}"))
}

async fn wait_status(client: &Client, url: &str, sub: &str, id: &str, want: &str) -> anyhow::Result<()> {
    let auth = crate::jwt::bearer(sub)?;
    TaskPoll::new(client, url).auth(&auth).until(id, Until::Status(want)).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operators_list_cancel_purge_and_drain_a_running_fleet() -> anyhow::Result<()> {
    let cluster = crate::jwt::with_jwt(Cluster::builder(3))
        .env("MCPGATE_ADMIN_LISTEN", "127.0.0.1:0")
        .env("MCPGATE_ADMIN_TOKEN", TOKEN)
        .env("MCPGATE_LOG_LEVEL", "info,mcpgate_runtime=debug")
        .start()?;
    let client = Client::new()?;
    let lb = cluster.url();
    let api = |i: usize| format!("http://{}", cluster.replica(i).admin_addr().unwrap_or("no-admin-address"));

    // A wrong token is refused.
    let mut wrong = vec!["admin", "--url"];
    let url0 = api(0);
    wrong.extend_from_slice(&[url0.as_str(), "status"]);
    let (status, _, stderr) =
        run_to_end(&wrong, &[("MCPGATE_ADMIN_TOKEN", "not-the-admin-token-but-long-enough-0000")])?;
    anyhow::ensure!(!status.success() && stderr.contains("401"), "a wrong token: {status} {stderr}");
    // The MCP port instead of the admin one: said as such, not as a bare 404.
    let mcp_port = format!("http://{}", cluster.replica(0).addr());
    let (status, _, stderr) = run_to_end(&["admin", "--url", &mcp_port, "status"], &[("MCPGATE_ADMIN_TOKEN", TOKEN)])?;
    anyhow::ensure!(
        !status.success() && stderr.contains("not from mcpgate's admin API") && stderr.contains("admin.listen"),
        "the MCP port: {status} {stderr}"
    );

    // Alice has two long tasks, bob one short one, all through the balancer.
    let (a1, a2) = (report(&client, &lb, "alice", 60).await?, report(&client, &lb, "alice", 60).await?);
    let b1 = report(&client, &lb, "bob", 1).await?;
    wait_status(&client, &lb, "bob", &b1, "completed").await?;

    // Every owner's tasks, from any replica's admin API.
    let all = admin(&api(1), TOKEN, &["tasks", "list"])?;
    let mut expected = vec![a1.clone(), a2.clone(), b1.clone()];
    expected.sort();
    anyhow::ensure!(ids(&all) == expected, "all tasks: {all}");
    // Owners are shown as operators know them: the token's issuer and subject.
    let alices_first = all["tasks"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["taskId"] == a1.as_str()))
        .ok_or_else(|| anyhow::anyhow!("no task {a1}: {all}"))?;
    anyhow::ensure!(alices_first["owner"]["subject"] == "alice", "{alices_first}");
    anyhow::ensure!(alices_first["owner"]["issuer"] == crate::jwt::ISSUER, "{alices_first}");
    // And found by subject, of any issuer or of the one named.
    let mut alices = vec![a1.clone(), a2.clone()];
    alices.sort();
    anyhow::ensure!(ids(&admin(&api(2), TOKEN, &["tasks", "list", "--owner", "alice"])?) == alices, "by owner");
    let by_issuer = admin(&api(2), TOKEN, &["tasks", "list", "--owner", "alice", "--issuer", crate::jwt::ISSUER])?;
    anyhow::ensure!(ids(&by_issuer) == alices, "by owner and issuer: {by_issuer}");
    let elsewhere = admin(&api(2), TOKEN, &["tasks", "list", "--owner", "alice", "--issuer", "https://other.example"])?;
    anyhow::ensure!(ids(&elsewhere).is_empty(), "another issuer's alice is another owner: {elsewhere}");
    anyhow::ensure!(ids(&admin(&api(0), TOKEN, &["tasks", "list", "--status", "completed"])?) == vec![b1.clone()]);
    anyhow::ensure!(ids(&admin(&api(0), TOKEN, &["tasks", "list", "--tool", "slow_report"])?) == expected);
    anyhow::ensure!(ids(&admin(&api(0), TOKEN, &["tasks", "list", "--tool", "echo"])?).is_empty());

    // Inspection shows metadata, not payloads.
    let inspected = admin(&api(0), TOKEN, &["tasks", "inspect", &a1])?;
    anyhow::ensure!(inspected["status"] == "working" && inspected["tool"] == "slow_report", "{inspected}");
    anyhow::ensure!(inspected.get("arguments").is_none() && !inspected.to_string().contains("secret-topic"));

    // The operator cancels alice's task; alice sees it cancelled, on any replica.
    let cancelled = admin(&api(2), TOKEN, &["tasks", "cancel", &a1])?;
    anyhow::ensure!(cancelled["status"] == "cancelled", "{cancelled}");
    anyhow::ensure!(status_of(&client, &lb, "alice", &a1).await? == "cancelled");

    // A purge deletes the ended tasks only: bob's by his subject, then the rest.
    let purged = admin(&api(1), TOKEN, &["tasks", "purge", "--owner", "bob"])?;
    anyhow::ensure!(purged["purged"] == 1, "{purged}");
    let purged = admin(&api(1), TOKEN, &["tasks", "purge"])?;
    anyhow::ensure!(purged["purged"] == 1, "{purged}");
    // One log line per purge request, none per task.
    let logs = cluster.replica(1).logs();
    anyhow::ensure!(
        logs.matches("admin: tasks purged").count() == 2 && !logs.contains("admin: task purged"),
        "purge log lines: {logs}"
    );
    anyhow::ensure!(
        ids(&admin(&api(0), TOKEN, &["tasks", "list"])?) == vec![a2.clone()],
        "only the working task is left"
    );

    // Replica 0 starts a task of its own (it runs where it was created), then is drained: that
    // task finishes there, and the tasks created on it meanwhile run elsewhere.
    let replica0 = cluster.replica_url(0);
    let before = report(&client, &replica0, "carol", 2).await?;
    let drained = admin(&api(0), TOKEN, &["drain"])?;
    anyhow::ensure!(drained["draining"] == true, "{drained}");
    let mut during = Vec::new();
    for _ in 0..4 {
        during.push(report(&client, &replica0, "carol", 1).await?);
    }
    wait_status(&client, &lb, "carol", &before, "completed").await?;
    for id in &during {
        wait_status(&client, &lb, "carol", id, "completed").await?;
    }
    let ran_on = |i: usize, id: &str| {
        cluster.replica(i).logs().lines().any(|l| l.contains("task run started") && l.contains(id))
    };
    anyhow::ensure!(ran_on(0, &before), "the task running on the drained replica finished there");
    for id in &during {
        anyhow::ensure!(!ran_on(0, id), "the drained replica ran {id}");
        anyhow::ensure!(ran_on(1, id) || ran_on(2, id), "no replica ran {id}");
    }
    let status = admin(&api(0), TOKEN, &["status"])?;
    anyhow::ensure!(status["draining"] == true && status["running"] == 0, "{status}");
    let (_, metrics) = client.get(&format!("http://{}/metrics", cluster.replica(0).addr())).await?;
    anyhow::ensure!(metrics.contains("mcpgate_worker_draining 1"), "the drain shows in the metrics");

    // Undrained, it runs what it creates again.
    let undrained = admin(&api(0), TOKEN, &["undrain"])?;
    anyhow::ensure!(undrained["draining"] == false, "{undrained}");
    let after = report(&client, &replica0, "carol", 1).await?;
    wait_status(&client, &lb, "carol", &after, "completed").await?;
    anyhow::ensure!(ran_on(0, &after), "the undrained replica runs its tasks again");

    let cancelled = admin(&api(0), TOKEN, &["tasks", "cancel", &a2])?;
    anyhow::ensure!(cancelled["status"] == "cancelled", "{cancelled}");
    Ok(())
}
