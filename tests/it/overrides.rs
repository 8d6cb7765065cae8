//! Tool overrides end to end: the reference `server-everything` (stdio) behind nginx in front
//! of three replicas sharing Redis, its `echo` and `get-sum` renamed with an argument hidden
//! (and one defaulted). Both eras list the overridden tools; the upstream answers with the
//! injected values; a caller sending a hidden argument is refused; a task run, on whichever
//! replica's worker takes it, injects too.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Until, poll_task, server_everything};

const EXT: &str = "io.modelcontextprotocol/tasks";

fn cluster(dir: &Path) -> anyhow::Result<Cluster> {
    let everything = server_everything()?;
    let config = format!(
        r#"[[upstream]]
name = "everything"
command = "node"
args = ["{}", "stdio"]
# Per-tool keys name the upstream's own tool, never the rename.
tool_task = {{ "get-sum" = "optional" }}

[upstream.overrides.echo]
rename = "announce"
description = "Announces the operator's message"
annotations = {{ readOnlyHint = false }}
hidden = {{ message = "fixed by the operator" }}

[upstream.overrides.get-sum]
rename = "add_forty"
hidden = {{ b = 40 }}
defaults = {{ a = 2 }}
"#,
        everything.display()
    );
    let path = dir.join("mcpgate.toml");
    std::fs::write(&path, config)?;
    // Tasks are answered as tasks (none with its result at creation): the test reads one back.
    Cluster::builder(3).args(&["--config", &path.to_string_lossy()]).env("MCPGATE_TASKS_ANSWER_WITHIN_MS", "0").start()
}

async fn modern(client: &Client, url: &str, method: &str, mut params: Value, tasks: bool) -> anyhow::Result<Value> {
    if tasks {
        params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    }
    Ok(client.modern(url, method, params).await?.json()?)
}

async fn call(client: &Client, url: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
    modern(client, url, "tools/call", json!({"name": tool, "arguments": arguments}), false).await
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The tool named `name` in a `tools/list` reply.
fn listed<'a>(list: &'a Value, name: &str) -> &'a Value {
    let tools = list["result"]["tools"].as_array().unwrap_or_else(|| panic!("a tool list: {list}"));
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(!names.contains(&"everything_echo") && !names.contains(&"everything_get-sum"), "{names:?}");
    assert!(names.contains(&"everything_get-env"), "tools without an override keep their prefix: {names:?}");
    tools.iter().find(|t| t["name"] == name).unwrap_or_else(|| panic!("{name} not in {names:?}"))
}

/// What every era must show of the overridden tools.
fn assert_overridden(list: &Value) {
    let announce = listed(list, "announce");
    assert_eq!(announce["description"], "Announces the operator's message");
    assert_eq!(announce["annotations"]["readOnlyHint"], false, "{announce}");
    assert_eq!(announce["annotations"]["idempotentHint"], true, "the upstream's other hints stay: {announce}");
    assert!(announce["inputSchema"]["properties"].get("message").is_none(), "{announce}");
    let required = announce["inputSchema"]["required"].as_array().cloned().unwrap_or_default();
    assert!(!required.contains(&json!("message")), "{announce}");
    let add = listed(list, "add_forty");
    assert!(add["inputSchema"]["properties"].get("b").is_none(), "{add}");
    assert_eq!(add["inputSchema"]["properties"]["a"]["default"], 2, "{add}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overridden_tools_are_listed_renamed_and_called_with_the_operator_s_values() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let cluster = cluster(dir.path())?;
    let client = Client::new()?;
    let lb = cluster.url();

    // Both eras list the override.
    assert_overridden(&modern(&client, &lb, "tools/list", json!({}), false).await?);
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let session = client.legacy(&lb, "initialize", init, None).await?.session.context("a session id")?;
    assert_overridden(&client.legacy(&lb, "tools/list", json!({}), Some(&session)).await?.json()?);

    // The upstream saw the injected value: its echo says it.
    let echoed = call(&client, &lb, "announce", json!({})).await?;
    assert_eq!(text(&echoed["result"]), "Echo: fixed by the operator", "{echoed}");
    let reply = client.legacy(&lb, "tools/call", json!({"name": "announce", "arguments": {}}), Some(&session)).await?;
    assert_eq!(text(&reply.json()?["result"]), "Echo: fixed by the operator");
    // Defaults fill what the caller left out; what the caller sends wins.
    assert_eq!(text(&call(&client, &lb, "add_forty", json!({})).await?["result"]), "The sum of 2 and 40 is 42.");
    assert_eq!(text(&call(&client, &lb, "add_forty", json!({"a": 1})).await?["result"]), "The sum of 1 and 40 is 41.");

    // A hidden argument from the caller is refused, naming it, and never reaches the upstream.
    let refused = call(&client, &lb, "announce", json!({"message": "mine"})).await?;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("\"message\"")), "{refused}");
    // The upstream's own name is not served.
    let unknown = call(&client, &lb, "everything_echo", json!({"message": "x"})).await?;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    // A task stores the caller's arguments; the worker that runs it (any replica) injects.
    let params = json!({"name": "add_forty", "arguments": {"a": 5}});
    let created = modern(&client, &lb, "tools/call", params, true).await?;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap_or_default().to_owned();
    let done = poll_task(&client, &lb, &id, Until::Terminal).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(text(&done["result"]), "The sum of 5 and 40 is 45.", "{done}");
    // Refused before any task is created.
    let params = json!({"name": "add_forty", "arguments": {"a": 5, "b": 1}});
    let refused = modern(&client, &lb, "tools/call", params, true).await?;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("\"b\"")), "{refused}");
    Ok(())
}
