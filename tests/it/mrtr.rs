//! Multi-round input across replicas: every round of every flow goes to a different replica
//! (Redis + several `mcpgate` processes + nginx). Ephemeral calls carry their progress in the
//! sealed requestState; parked tasks are answered on one replica and resumed on another.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, ClusterBuilder, Until, poll_task};

const EXT: &str = "io.modelcontextprotocol/tasks";

pub(crate) fn cluster(replicas: usize) -> ClusterBuilder {
    Cluster::builder(replicas).env("MCPGATE_TOOLSET", "conformance,demo")
}

/// Who calls: anonymous, or a JWT subject.
#[derive(Clone, Copy)]
enum As {
    Anonymous,
    User(&'static str),
}

/// A modern request declaring elicitation, sampling and roots (no tasks: calls stay
/// synchronous).
async fn modern(client: &Client, url: &str, who: As, method: &str, params: Value) -> anyhow::Result<Value> {
    request(client, url, who, json!({"elicitation": {}, "sampling": {}, "roots": {}}), method, params).await
}

/// A modern request that also declares the tasks extension.
pub(crate) async fn tasking(client: &Client, url: &str, method: &str, params: Value) -> anyhow::Result<Value> {
    let caps = json!({"elicitation": {}, "sampling": {}, "roots": {}, "extensions": {EXT: {}}});
    request(client, url, As::Anonymous, caps, method, params).await
}

async fn request(
    client: &Client,
    url: &str,
    who: As,
    caps: Value,
    method: &str,
    mut params: Value,
) -> anyhow::Result<Value> {
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": caps});
    let auth = match who {
        As::Anonymous => None,
        As::User(sub) => Some(crate::jwt::bearer(sub)?),
    };
    let extra: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    Ok(client.modern_with(url, &extra, method, params).await?.json()?)
}

fn round(name: &str, arguments: Value, answers: Value, state: Option<&str>) -> Value {
    let mut params = json!({"name": name, "arguments": arguments, "inputResponses": answers});
    if let Some(state) = state {
        params["requestState"] = json!(state);
    }
    params
}

pub(crate) fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// The requestState of an InputRequiredResult reply.
fn state_of(reply: &Value) -> String {
    assert_eq!(reply["result"]["resultType"], "input_required", "{reply}");
    reply["result"]["requestState"].as_str().expect("a requestState").to_owned()
}

fn assert_invalid_state(reply: &Value) {
    assert_eq!(reply["error"]["code"], -32602, "{reply}");
    assert_eq!(reply["error"]["message"], "Invalid params: invalid requestState", "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_round_call_with_each_round_on_another_replica() -> anyhow::Result<()> {
    let cluster = cluster(3).start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let args = json!({"id": "WI-7"});
    let r1 =
        modern(&client, &url(0), As::Anonymous, "tools/call", round("update_work_item", args.clone(), json!({}), None))
            .await?;
    let s1 = state_of(&r1);
    let r2 = modern(
        &client,
        &url(1),
        As::Anonymous,
        "tools/call",
        round("update_work_item", args.clone(), json!({"field": accept(json!({"field": "assignee"}))}), Some(&s1)),
    )
    .await?;
    let s2 = state_of(&r2);
    let r3 = modern(
        &client,
        &url(2),
        As::Anonymous,
        "tools/call",
        round("update_work_item", args, json!({"value": accept(json!({"value": "grace"}))}), Some(&s2)),
    )
    .await?;
    assert_eq!(
        r3["result"]["content"][0]["text"], r#"Work item WI-7 updated: assignee "unassigned" → "grace""#,
        "{r3}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replayed_and_tampered_states_are_refused_on_every_replica() -> anyhow::Result<()> {
    let cluster = cluster(3).env("MCPGATE_SEAL_REQUEST_STATE_SINGLE_USE", "true").start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let args = json!({"table": "audit", "older_than_days": 90});
    let yes = json!({"confirm": accept(json!({"confirm": true}))});
    let state = state_of(
        &modern(&client, &url(0), As::Anonymous, "tools/call", round("delete_records", args.clone(), json!({}), None))
            .await?,
    );
    let tampered = format!("{state}-TAMPERED");
    assert_invalid_state(
        &modern(
            &client,
            &url(1),
            As::Anonymous,
            "tools/call",
            round("delete_records", args.clone(), yes.clone(), Some(&tampered)),
        )
        .await?,
    );
    let done = modern(
        &client,
        &url(1),
        As::Anonymous,
        "tools/call",
        round("delete_records", args.clone(), yes.clone(), Some(&state)),
    )
    .await?;
    assert!(done["result"]["content"][0]["text"].as_str().unwrap_or_default().starts_with("Deleted "), "{done}");
    // The replay reaches another replica; the shared store remembers the first use.
    assert_invalid_state(
        &modern(&client, &url(2), As::Anonymous, "tools/call", round("delete_records", args, yes, Some(&state)))
            .await?,
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_minted_for_one_user_or_tool_is_refused_for_another() -> anyhow::Result<()> {
    let cluster = crate::jwt::with_jwt(cluster(3)).start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let args = json!({"table": "payments", "older_than_days": 30});
    let yes = json!({"confirm": accept(json!({"confirm": true}))});
    let alice = As::User("alice");
    let state = state_of(
        &modern(&client, &url(0), alice, "tools/call", round("delete_records", args.clone(), json!({}), None)).await?,
    );
    // Bob presents Alice's state.
    assert_invalid_state(
        &modern(
            &client,
            &url(1),
            As::User("bob"),
            "tools/call",
            round("delete_records", args.clone(), yes.clone(), Some(&state)),
        )
        .await?,
    );
    // Alice presents it to another tool.
    assert_invalid_state(
        &modern(
            &client,
            &url(2),
            alice,
            "tools/call",
            round("update_work_item", json!({"id": "payments"}), yes.clone(), Some(&state)),
        )
        .await?,
    );
    // Where it belongs, it works.
    let done = modern(&client, &url(2), alice, "tools/call", round("delete_records", args, yes, Some(&state))).await?;
    assert!(done["result"]["content"][0]["text"].as_str().unwrap_or_default().starts_with("Deleted "), "{done}");
    Ok(())
}

/// Polls `tasks/get` on `url` (bounded) until the task has `status`.
pub(crate) async fn wait_for(client: &Client, url: &str, id: &str, status: &str) -> anyhow::Result<Value> {
    Ok(poll_task(client, url, id, Until::Status(status)).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_task_answered_on_one_replica_resumes_on_another_after_its_executor_died() -> anyhow::Result<()> {
    // A runs tasks; B only serves. After A parks the task it is killed; C starts, and only C
    // can resume it.
    let mut cluster = cluster(2).replica_env(1, "MCPGATE_TASKS_MAX_RUNNING", "0").start()?;
    let client = Client::new()?;
    let (a, b) = (cluster.replica_url(0), cluster.replica_url(1));
    let created =
        tasking(&client, &b, "tools/call", json!({"name": "confirm_delete", "arguments": {"filename": "cache.db"}}))
            .await?;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let parked = wait_for(&client, &a, &id, "input_required").await?;
    assert_eq!(parked["inputRequests"]["confirm"]["method"], "elicitation/create", "{parked}");
    cluster.kill(0);

    let c = cluster.add_replica(&[("MCPGATE_LOG_LEVEL", "info,mcpgate_runtime=debug")])?;
    let ack = tasking(
        &client,
        &b,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"confirm": accept(json!({"confirm": true}))}}),
    )
    .await?;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = wait_for(&client, &b, &id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted cache.db");
    let log = cluster.replica(c).logs();
    assert!(log.contains(&id) && log.contains("task run started"), "C ran the resumed task:\n{log}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_stream_delivers_the_request_and_the_answer_lands_elsewhere() -> anyhow::Result<()> {
    // The stream is on replica 0 (which runs no tasks); the answer goes to replica 1.
    let cluster = cluster(3).replica_env(0, "MCPGATE_TASKS_MAX_RUNNING", "0").start()?;
    let client = Client::new()?;
    let (waiter, other) = (cluster.replica_url(0), cluster.replica_url(1));
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "e2e", "version": "1"}});
    let session = client.legacy(&cluster.url(), "initialize", init, None).await?.session.expect("a session");
    let call = json!({"name": "confirm_delete", "arguments": {"filename": "tmp.bin"}, "task": {}});
    let created = client.legacy(&cluster.url(), "tools/call", call, Some(&session)).await?.json()?;
    let id = created["result"]["task"]["taskId"].as_str().expect("a task").to_owned();

    let mut stream = client.legacy_stream(&waiter, "tasks/result", json!({"taskId": id}), &session).await?;
    let request = stream.next(Duration::from_secs(15)).await?.expect("an input request");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());

    let answer = json!({"jsonrpc": "2.0", "id": request["id"], "result": accept(json!({"confirm": true}))});
    let posted = client.legacy_message(&other, &session, &[], &answer).await?;
    assert_eq!(posted.status, 202, "{}", posted.body);

    let last = stream.next_result(Duration::from_secs(20)).await?;
    assert_eq!(last["result"]["content"][0]["text"], "Deleted tmp.bin", "{last}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_before_a_task_starts_then_the_task_runs_elsewhere() -> anyhow::Result<()> {
    let cluster = cluster(3).start()?;
    let client = Client::new()?;
    let url = |i: usize| cluster.replica_url(i);
    let r1 = tasking(&client, &url(0), "tools/call", json!({"name": "test_tool_with_task"})).await?;
    let state = state_of(&r1);
    let mut params =
        json!({"name": "test_tool_with_task", "inputResponses": {"user_name": accept(json!({"name": "Alice"}))}});
    params["requestState"] = json!(state);
    let created = tasking(&client, &url(1), "tools/call", params).await?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let done = wait_for(&client, &url(2), &id, "completed").await?;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Alice! (from a task)");
    Ok(())
}
