//! `subscriptions/listen` and 2025-11-25 GET streams across replicas: a stream opened on one
//! replica hears list changes announced on another and the status of its caller's tasks run
//! anywhere, only what it asked for, tagged with its subscription id, and ends with its
//! closing result when its replica shuts down.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, EventStream, PATIENCE};

const EXT: &str = "io.modelcontextprotocol/tasks";
const SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

fn ext() -> Value {
    json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}})
}

/// The next message on `stream` with this method (others skipped), within `within`.
async fn next_with(stream: &mut EventStream, method: &str, within: Duration) -> anyhow::Result<Value> {
    let next = async {
        loop {
            let message = stream.next(within).await?.ok_or_else(|| anyhow::anyhow!("stream ended before {method}"))?;
            if message["method"] == method {
                return Ok(message);
            }
        }
    };
    tokio::time::timeout(within, next).await.map_err(|_| anyhow::anyhow!("no {method} within {within:?}"))?
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listeners_hear_changes_and_tasks_from_other_replicas() -> anyhow::Result<()> {
    let cluster = Cluster::builder(3).env("MCPGATE_TOOLSET", "conformance").start()?;
    let client = Client::new()?;
    let (a, b, c) = (cluster.replica_url(0), cluster.replica_url(1), cluster.replica_url(2));

    // A task created on replica B.
    let created =
        client.modern(&b, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 2}, "_meta": ext()}));
    let created = created.await?.json()?;
    let task = created["result"]["taskId"].as_str().expect("a task").to_owned();

    // Task notifications need the extension.
    let refused = client.modern(&a, "subscriptions/listen", json!({"notifications": {"taskIds": [task]}})).await?;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert_eq!(refused.json()?["error"]["code"], -32021);

    // A listen stream on replica A: the acknowledgement first, naming only what it will send.
    let params = json!({
        "notifications": {"toolsListChanged": true, "taskIds": [task, "no-such-task"]},
        "_meta": ext(),
    });
    let mut listen = client.modern_stream(&a, "subscriptions/listen", params).await?;
    let ack = listen.next(Duration::from_secs(5)).await?.expect("an acknowledgement");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true, "taskIds": [task]}), "{ack}");
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION], 1, "{ack}");

    // A 2025-11-25 session's GET stream on replica C.
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let session = client.legacy(&c, "initialize", init, None).await?.session.expect("a session");
    let mut get = client.get_stream(&c, &session).await?;
    let (status, _) = client.get(&c).await?;
    assert_eq!(status, 405, "GET without a session is not allowed");

    // A change announced on replica B reaches both.
    let trigger = client.modern(&b, "tools/call", json!({"name": "test_trigger_tool_change", "arguments": {}}));
    assert_eq!(trigger.await?.json()?["result"]["isError"], Value::Null);
    let changed = next_with(&mut listen, "notifications/tools/list_changed", Duration::from_secs(10)).await?;
    assert_eq!(changed["params"]["_meta"][SUBSCRIPTION], 1, "{changed}");
    let bare = next_with(&mut get, "notifications/tools/list_changed", Duration::from_secs(10)).await?;
    assert_eq!(bare, json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}));
    // Prompt changes were not asked for, on the listen stream.
    let trigger = client.modern(&b, "tools/call", json!({"name": "test_trigger_prompt_change", "arguments": {}}));
    trigger.await?;

    // The task, run by whichever replica's worker took it, is reported when it finishes.
    let completed = async {
        loop {
            let message = listen.next(PATIENCE).await?.expect("the stream stays open");
            assert_ne!(message["method"], "notifications/prompts/list_changed", "not asked for: {message}");
            if message["method"] == "notifications/tasks" && message["params"]["status"] == "completed" {
                return anyhow::Ok(message);
            }
        }
    };
    let done = tokio::time::timeout(PATIENCE, completed)
        .await
        .map_err(|_| anyhow::anyhow!("no notification of task {task} completing within {PATIENCE:?}"))??;
    assert_eq!(done["params"]["taskId"], task.as_str(), "{done}");
    assert_eq!(done["params"]["_meta"][SUBSCRIPTION], 1, "{done}");
    assert!(done["params"]["result"]["content"].is_array(), "the result is inline: {done}");

    // Replica A shutting down ends the stream with its closing result.
    cluster.replica(0).terminate()?;
    let last = loop {
        let message = listen.next(Duration::from_secs(15)).await?.expect("a closing result");
        if message.get("id").is_some() {
            break message;
        }
    };
    assert_eq!(
        last,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "complete", "_meta": {SUBSCRIPTION: 1}}})
    );
    assert!(listen.next(Duration::from_secs(5)).await?.is_none(), "the stream ends after its result");
    Ok(())
}
