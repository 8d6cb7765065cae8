//! Task payloads encrypted at rest, through nginx in front of three replicas with Redis: a
//! task created on one replica, asked for input, answered on another and completed has its
//! arguments and result in no readable form in a dump of Redis, while every replica serves
//! them to the client in plain; and someone who can write to Redis can neither plant a plain
//! result in a task created after the cutover nor hand one principal's result to another by
//! rewriting the owner, while tasks stored before the cutover still read.

use std::process::Command;

use serde_json::json;

use mcpgate_e2e::{Client, Cluster, TaskPoll, Until};

use crate::mrtr::{accept, cluster, tasking, wait_for};

/// Everything Redis on `port` holds, as `SAVE` writes it (uncompressed, so plain text in it
/// would be found).
pub(crate) fn dump(port: u16) -> anyhow::Result<String> {
    let cli = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output()?;
        anyhow::ensure!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    cli(&["CONFIG", "SET", "rdbcompression", "no"])?;
    cli(&["SAVE"])?;
    let dir = cli(&["CONFIG", "GET", "dir"])?;
    let file = cli(&["CONFIG", "GET", "dbfilename"])?;
    let (dir, file) = (dir.lines().nth(1).unwrap_or_default(), file.lines().nth(1).unwrap_or_default());
    Ok(String::from_utf8_lossy(&std::fs::read(std::path::Path::new(dir).join(file))?).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_dump_of_a_completed_task_holds_no_plain_argument_or_result() -> anyhow::Result<()> {
    let mut cluster = cluster(3).start()?;
    let client = Client::new()?;
    let url = cluster.url();
    let secret = "quarterly-payroll-9f3c2e.db";

    let created =
        tasking(&client, &url, "tools/call", json!({"name": "confirm_delete", "arguments": {"filename": secret}}))
            .await?;
    let id = created["result"]["taskId"].as_str().ok_or_else(|| anyhow::anyhow!("no task: {created}"))?.to_owned();
    wait_for(&client, &url, &id, "input_required").await?;
    let ack = tasking(
        &client,
        &url,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"confirm": accept(json!({"confirm": true}))}}),
    )
    .await?;
    anyhow::ensure!(ack["result"]["resultType"] == "complete", "{ack}");
    let done = wait_for(&client, &url, &id, "completed").await?;
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    anyhow::ensure!(text == format!("Deleted {secret}"), "the client reads the result in plain: {done}");

    let dump = dump(cluster.redis().port())?;
    anyhow::ensure!(!dump.contains("quarterly-payroll"), "the argument or the result is in the dump");
    // The dump is readable: what stays in plain for operators is in it.
    for visible in [id.as_str(), "confirm_delete", "completed"] {
        anyhow::ensure!(dump.contains(visible), "{visible} is not in the dump");
    }
    Ok(())
}

/// `redis-cli -p <port> <args>`'s output, trimmed.
fn redis_cli(port: u16, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output()?;
    anyhow::ensure!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The Redis key of task `id`'s record.
fn task_key(port: u16, id: &str) -> anyhow::Result<String> {
    let keys = redis_cli(port, &["KEYS", &format!("*:task:{id}")])?;
    keys.lines().next().map(str::to_owned).ok_or_else(|| anyhow::anyhow!("no record of {id}"))
}

/// A modern request of the principal `auth` to one replica: (HTTP status, JSON reply).
async fn call(
    client: &Client,
    url: &str,
    auth: &str,
    method: &str,
    params: serde_json::Value,
) -> anyhow::Result<(u16, serde_json::Value)> {
    let mut params = params;
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities":
        {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let reply = client.modern_with(url, &[("authorization", auth)], method, params).await?;
    Ok((reply.status, reply.json()?))
}

/// A `slow_compute` task of `auth` labelled `label`, run to completion: its id and its result
/// (0.2 s, past the answer window, so the call answers with the task).
async fn completed(client: &Client, url: &str, auth: &str, label: &str) -> anyhow::Result<(String, serde_json::Value)> {
    let args = json!({"name": "slow_compute", "arguments": {"seconds": 0.2, "label": label}});
    let (_, created) = call(client, url, auth, "tools/call", args).await?;
    let id = created["result"]["taskId"].as_str().ok_or_else(|| anyhow::anyhow!("no task: {created}"))?.to_owned();
    let task = TaskPoll::new(client, url).auth(auth).until(&id, Until::Status("completed")).await;
    Ok((id, task["result"].clone()))
}

/// `value` as a release before the owner binding sealed `field` of task `id` (marker `\x01`,
/// bound to task and field only), with the test cluster's key.
fn sealed_the_old_way(id: &str, field: &str, value: &str) -> anyhow::Result<String> {
    let ring = mcpgate_seal::KeyRing::parse(&[mcpgate_e2e::CLUSTER_SEAL_KEYS])?;
    let sealer = mcpgate_seal::Sealer::new(ring, usize::MAX);
    let binding = mcpgate_seal::Binding {
        purpose: mcpgate_seal::Purpose::AtRest,
        principal: id,
        method: field,
        context: &[0; 32],
    };
    Ok(format!("\u{1}{}", sealer.seal(&binding, u64::MAX, value.as_bytes())?))
}

/// The reply to a read of a task whose stored payload must not be served.
fn unreadable(status: u16, reply: &serde_json::Value, secret: &str) -> anyhow::Result<()> {
    anyhow::ensure!(!reply.to_string().contains(secret), "served: {reply}");
    anyhow::ensure!(status == 500, "HTTP {status}: {reply}");
    anyhow::ensure!(reply["error"]["code"] == -32603, "{reply}");
    let message = reply["error"]["message"].as_str().unwrap_or_default();
    anyhow::ensure!(message.ends_with("a stored task cannot be read"), "{reply}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_planted_or_reowned_in_redis_are_refused_after_the_cutover_and_older_ones_still_read()
-> anyhow::Result<()> {
    // One replica, first with sealing off (a fleet before encryption at rest, or mid-upgrade),
    // then restarted with it on and a zero migration window: the cutover is that restart.
    let mut cluster = crate::jwt::with_jwt(Cluster::builder(1).env("MCPGATE_TOOLSET", "conformance"))
        .env("MCPGATE_STORE_ENCRYPT_AT_REST", "false")
        .env("MCPGATE_STORE_AT_REST_WINDOW_SECS", "0")
        // What a read from Redis refuses is tested: a finished record a replica kept from
        // before the plant would be served instead (the true one).
        .env("MCPGATE_STORE_TERMINAL_CACHE_ENTRIES", "0")
        .start()?;
    let client = Client::new()?;
    let url = cluster.replica_url(0);
    let port = cluster.redis().port();
    let (alice, bob) = (crate::jwt::bearer("alice")?, crate::jwt::bearer("bob")?);

    // Before the cutover: a task stored in plain, and one whose result an older release sealed.
    let (old_plain, old_plain_result) = completed(&client, &url, &alice, "old-plain").await?;
    let (old_sealed, _) = completed(&client, &url, &alice, "old-sealed").await?;
    let older = json!({"content": [{"type": "text", "text": "sealed-the-old-way"}]}).to_string();
    redis_cli(
        port,
        &["HSET", &task_key(port, &old_sealed)?, "result", &sealed_the_old_way(&old_sealed, "result", &older)?],
    )?;

    cluster.stop(0)?;
    cluster.restart(0, &[("MCPGATE_STORE_ENCRYPT_AT_REST", "true")])?;

    // They still read.
    let (_, task) = call(&client, &url, &alice, "tasks/get", json!({"taskId": old_plain})).await?;
    anyhow::ensure!(task["result"]["result"] == old_plain_result, "{task}");
    let (_, task) = call(&client, &url, &alice, "tasks/get", json!({"taskId": old_sealed})).await?;
    anyhow::ensure!(task["result"]["result"]["content"][0]["text"] == "sealed-the-old-way", "{task}");

    // After the cutover, a plain result planted by someone with write access to Redis is
    // refused, not served to the owner.
    let (planted, _) = completed(&client, &url, &alice, "new").await?;
    let forged = json!({"content": [{"type": "text", "text": "planted-by-mallory"}]}).to_string();
    redis_cli(port, &["HSET", &task_key(port, &planted)?, "result", &forged])?;
    let (status, reply) = call(&client, &url, &alice, "tasks/get", json!({"taskId": planted})).await?;
    unreadable(status, &reply, "planted-by-mallory")?;

    // An owner rewritten to bob's does not give bob alice's result.
    let (bobs, _) = completed(&client, &url, &bob, "bobs").await?;
    let bob_key = redis_cli(port, &["HGET", &task_key(port, &bobs)?, "owner"])?;
    let (alices, result) = completed(&client, &url, &alice, "alice-private-result").await?;
    anyhow::ensure!(result.to_string().contains("alice-private-result"), "the label is in the result: {result}");
    redis_cli(port, &["HSET", &task_key(port, &alices)?, "owner", &bob_key])?;
    let (status, reply) = call(&client, &url, &bob, "tasks/get", json!({"taskId": alices})).await?;
    unreadable(status, &reply, "alice-private-result")?;
    Ok(())
}
