//! Which task a repeated `tools/call` gets, through nginx in front of three replicas (so every
//! request of a case lands on another replica): 2025-11-25 deduplicates by session and request
//! id, 2026-07-28 only by a client's `Idempotency-Key`; a task-capable `tasks/get` without
//! `Mcp-Name` is accepted (as real clients send it) while a wrong one is not.

use serde_json::{Value, json};

use mcpgate_client::McpRequest;
use mcpgate_e2e::{Client, Cluster};

const EXT: &str = "io.modelcontextprotocol/tasks";

async fn legacy_session(client: &Client, url: &str) -> anyhow::Result<String> {
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let reply = client.legacy(url, "initialize", init, None).await?;
    reply.session.ok_or_else(|| anyhow::anyhow!("no session id: {}", reply.body))
}

/// A modern task call with request id `id`, the given extra headers and extra `_meta`.
async fn modern_call(
    client: &Client,
    url: &str,
    id: i64,
    arguments: Value,
    headers: &[(&str, &str)],
    meta: Value,
) -> anyhow::Result<Value> {
    let mut params = json!({
        "name": "slow_compute",
        "arguments": arguments,
        "_meta": {"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}},
    });
    if let Value::Object(extra) = meta {
        for (k, v) in extra {
            params["_meta"][k] = v;
        }
    }
    let request = headers
        .iter()
        .fold(McpRequest::modern(id, "tools/call", params), |request, (name, value)| request.header(*name, *value));
    Ok(client.send(url, &request).await?.json()?)
}

fn task_id(reply: &Value) -> String {
    reply["result"]["taskId"]
        .as_str()
        .or_else(|| reply["result"]["task"]["taskId"].as_str())
        .unwrap_or_else(|| panic!("a task id in {reply}"))
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repeated_calls_get_the_right_task() -> anyhow::Result<()> {
    let cluster = Cluster::builder(3).env("MCPGATE_TOOLSET", "conformance").start()?;
    let client = Client::new()?;
    let lb = cluster.url();

    // 2025-11-25: two sessions using the same request id and arguments get two tasks; a
    // session repeating its request gets its own task back.
    let (one, two) = (legacy_session(&client, &lb).await?, legacy_session(&client, &lb).await?);
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.2}, "task": {}});
    let first = task_id(&client.legacy(&lb, "tools/call", call.clone(), Some(&one)).await?.json()?);
    let other = task_id(&client.legacy(&lb, "tools/call", call.clone(), Some(&two)).await?.json()?);
    assert_ne!(first, other, "another session with the same request id gets a task of its own");
    let retry = task_id(&client.legacy(&lb, "tools/call", call.clone(), Some(&one)).await?.json()?);
    assert_eq!(retry, first, "the same session's retry gets its task back");

    // 2026-07-28 without a key: every call is a new task, whatever its id.
    let args = json!({"seconds": 0.2});
    let a = task_id(&modern_call(&client, &lb, 1, args.clone(), &[], json!({})).await?);
    let b = task_id(&modern_call(&client, &lb, 1, args.clone(), &[], json!({})).await?);
    assert_ne!(a, b, "no key, no deduplication");

    // With the same Idempotency-Key (header, or _meta for clients without headers) the same
    // task, from any replica and whatever the request id.
    let key = [("idempotency-key", "\"order-7f3a\"")];
    let keyed = task_id(&modern_call(&client, &lb, 1, args.clone(), &key, json!({})).await?);
    for id in 2..5 {
        let again = task_id(&modern_call(&client, &lb, id, args.clone(), &key, json!({})).await?);
        assert_eq!(again, keyed, "the same key names the same task");
    }
    let meta = json!({"io.mcpgate/idempotencyKey": "order-7f3a"});
    assert_eq!(task_id(&modern_call(&client, &lb, 9, args.clone(), &[], meta).await?), keyed);
    let fresh =
        task_id(&modern_call(&client, &lb, 1, args.clone(), &[("idempotency-key", "order-8")], json!({})).await?);
    assert_ne!(fresh, keyed, "another key, another task");

    // The same key with other arguments is refused, and creates nothing.
    let reused = modern_call(&client, &lb, 1, json!({"seconds": 0.3}), &key, json!({})).await?;
    assert_eq!(reused["error"]["code"], -32602, "{reused}");
    let message = reused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("reused with different arguments"), "{reused}");
    // A malformed key is refused too.
    let bad = modern_call(&client, &lb, 1, args.clone(), &[("idempotency-key", "two words")], json!({})).await?;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");

    // tasks/get without Mcp-Name (as the FastMCP client sends it) is served; a wrong one not.
    let get = |name: Option<&'static str>| {
        let (client, lb, keyed) = (&client, &lb, &keyed);
        async move {
            let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"taskId": keyed, "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}},
            }}})
            .to_string();
            let mut headers = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tasks/get")];
            if let Some(name) = name {
                headers.push(("mcp-name", name));
            }
            client.post(lb, &headers, body).await
        }
    };
    let without = get(None).await?;
    assert_eq!(without.status, 200, "{}", without.body);
    assert_eq!(without.json()?["result"]["taskId"], keyed.as_str());
    let wrong = get(Some("t00-AAAAAAAAAAAAAAAAAAAAAA")).await?;
    assert_eq!((wrong.status, wrong.json()?["error"]["code"].clone()), (400, json!(-32020)));
    let mut counted = 0;
    for i in 0..3 {
        let (_, text) = client.get(&format!("http://{}/metrics", cluster.replica(i).addr())).await?;
        counted += text
            .lines()
            .find_map(|l| l.strip_prefix("mcpgate_missing_mcp_name_total "))
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0);
    }
    assert_eq!(counted, 1, "the lenient acceptance is counted");
    Ok(())
}
