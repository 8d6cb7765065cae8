//! Era bridging through the gateway, through nginx in front of three replicas: a 2026-07-28
//! upstream (mcpgate itself, serving the conformance fixtures) that asks for input mid-call,
//! used by a modern client (its rounds relayed, each retry on another replica) and by a legacy
//! client inside a task (the round parks the task; the client answers on another replica).

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Gateway};

/// A modern request declaring form elicitation.
async fn asking(client: &Client, url: &str, mut params: Value) -> anyhow::Result<Value> {
    params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    client.modern(url, "tools/call", params).await?.json()
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
    assert!(round["inputRequests"]["step2"]["params"]["message"].as_str().unwrap_or_default().contains("Ada"));
    let state2 = round["requestState"].as_str().expect("a sealed state").to_owned();

    // The gateway's state is sealed: a tampered one is refused, not passed upstream.
    let mut tampered = state2.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    let forged = json!({
        "name": tool, "arguments": {},
        "inputResponses": {"step2": accept(json!({"color": "red"}))},
        "requestState": String::from_utf8(tampered)?,
    });
    let refused = asking(&client, &url(2), forged).await?;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");

    let done = json!({
        "name": tool, "arguments": {},
        "inputResponses": {"step2": accept(json!({"color": "green"}))},
        "requestState": state2,
    });
    let done = asking(&client, &url(2), done).await?;
    assert_eq!(done["result"]["content"][0]["text"], "Ada likes green", "{done}");

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
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-11-25")];
    let posted = client.post(&url(2), &headers, answer.to_string()).await?;
    assert_eq!(posted.status, 202, "{}", posted.body);
    let last = loop {
        let message = stream.next(Duration::from_secs(20)).await?.expect("the result before the stream ends");
        if message.get("result").is_some() || message.get("error").is_some() {
            break message;
        }
    };
    assert_eq!(last["result"]["content"][0]["text"], "Hello, Grace!", "{last}");
    Ok(())
}
