//! The library's runnable examples (crates/gateway/examples), each started as its own process
//! and used the way a client would: the typed tool, the background report with progress, and
//! the tool that asks the user a question; each then stops cleanly on SIGTERM.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Gateway, Look, PATIENCE, wait_for};

async fn call(client: &Client, url: &str, params: Value) -> anyhow::Result<Value> {
    Ok(client.modern(url, "tools/call", params).await?.json()?)
}

fn stop(mut example: Gateway) -> anyhow::Result<()> {
    example.terminate()?;
    let status = example.wait(Duration::from_secs(20))?;
    anyhow::ensure!(status.success(), "the example exited with {status}\n{}", example.logs());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_tool_derives_its_schema_and_converts() -> anyhow::Result<()> {
    let example = Gateway::builder().example("typed_tool")?.start()?;
    let client = Client::new()?;
    let url = example.url();

    let list = client.modern(&url, "tools/list", json!({})).await?.json()?;
    let tools = list["result"]["tools"].as_array().expect("tools");
    assert_eq!(tools.len(), 1, "only the Rust tool: {list}");
    let schema = &tools[0]["inputSchema"];
    assert_eq!(schema["properties"]["value"]["description"], "The temperature to convert.", "{schema}");
    assert_eq!(schema["required"], json!(["value", "from"]), "{schema}");

    let reply =
        call(&client, &url, json!({"name": "convert_temperature", "arguments": {"value": 100, "from": "C"}})).await?;
    assert_eq!(reply["result"]["structuredContent"], json!({"value": 212.0, "unit": "F"}), "{reply}");
    let reply =
        call(&client, &url, json!({"name": "convert_temperature", "arguments": {"value": 1, "from": "K"}})).await?;
    assert_eq!(reply["result"]["isError"], true, "a tool error the model can read: {reply}");
    let reply = call(&client, &url, json!({"name": "convert_temperature", "arguments": {"value": "hot"}})).await?;
    assert_eq!(reply["result"]["isError"], true, "bad arguments are a result the model reads (SEP-1303): {reply}");
    let text = reply["result"]["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("invalid arguments"), "the reason, for the model: {reply}");
    stop(example)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_report_runs_as_a_task_followed_by_the_companions() -> anyhow::Result<()> {
    let example = Gateway::builder().example("background_report")?.start()?;
    let client = Client::new()?;
    let url = example.url();

    let started =
        call(&client, &url, json!({"name": "write_report", "arguments": {"topic": "tides", "sections": 2}})).await?;
    let id = started["result"]["structuredContent"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task id at once: {started}"))
        .to_owned();
    let mut messages = Vec::new();
    wait_for(format!("task {id} to finish (task_status)"), PATIENCE, async || {
        let status = call(&client, &url, json!({"name": "task_status", "arguments": {"taskId": id}})).await?;
        let status = &status["result"]["structuredContent"];
        if let Some(message) = status["message"].as_str() {
            messages.push(message.to_owned());
        }
        Ok(if status["status"] == "working" { Look::not_yet(status) } else { Look::Done(()) })
    })
    .await;
    let result = call(&client, &url, json!({"name": "task_result", "arguments": {"taskId": id}})).await?;
    assert_eq!(result["result"]["content"][0]["text"], "Report on tides: 2 sections.", "{result}");
    assert!(messages.iter().any(|m| m.starts_with("Wrote section")), "progress was seen: {messages:?}");
    stop(example)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_user_asks_then_finishes_with_the_answer() -> anyhow::Result<()> {
    let example = Gateway::builder().example("ask_user")?.start()?;
    let client = Client::new()?;
    let url = example.url();

    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}});
    let first = call(&client, &url, json!({"name": "book_table", "arguments": {"guests": 4}, "_meta": caps})).await?;
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(result["inputRequests"]["name"]["method"], "elicitation/create", "{first}");
    let state = result["requestState"].as_str().expect("a requestState");
    let answered = call(
        &client,
        &url,
        json!({
            "name": "book_table",
            "arguments": {"guests": 4},
            "inputResponses": {"name": {"action": "accept", "content": {"name": "Ada"}}},
            "requestState": state,
            "_meta": caps,
        }),
    )
    .await?;
    assert_eq!(answered["result"]["content"][0]["text"], "Booked a table for 4 under Ada.", "{answered}");
    stop(example)
}
