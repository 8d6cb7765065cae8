//! `discovery = "search"` on a virtual server: its list holds `search_tools` and `call_tool`;
//! a search finds only what the caller could use there, ranked, as full definitions; a call
//! through `call_tool` is judged and run as the tool it names. Both eras, in-process.

use serde_json::{Value, json};

use mcpgate::Config;
use mcpgate::config::{Discovery, Effect, VirtualServer};
use mcpgate::policy::PolicyRule;

use crate::support::{Req, app, assert_error, config};

const FIND: &str = "/servers/find/mcp";

/// `find`: every tool, by search; its rule denies `sum`.
fn with_search(mut c: Config) -> Config {
    let mut find = VirtualServer::new("find");
    find.tools = vec!["*".to_owned()];
    find.discovery = Discovery::Search;
    find.policy = vec![PolicyRule::new("find-no-sum", "tool == 'sum'", Effect::Deny).with_message("no sums here")];
    c.servers = vec![find];
    c
}

fn call(name: &str, arguments: Value) -> Req {
    Req::modern("tools/call", json!({"name": name, "arguments": arguments})).at(FIND)
}

fn found(result: &Value) -> Vec<String> {
    let tools = result["structuredContent"]["tools"].as_array().unwrap_or_else(|| panic!("no tools: {result}"));
    tools.iter().map(|t| t["name"].as_str().unwrap_or_default().to_owned()).collect()
}

#[tokio::test]
async fn a_search_server_lists_two_tools_and_finds_and_calls_the_rest() {
    let app = app(with_search(config())).await;
    let list = Req::modern("tools/list", json!({})).at(FIND).send(&app).await.result();
    let mut names: Vec<&str> =
        list["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, ["call_tool", "search_tools"], "{list}");

    let result = call("search_tools", json!({"query": "echo"})).send(&app).await.result();
    let hits = found(&result);
    assert_eq!(hits.first().map(String::as_str), Some("echo"), "the exact name first: {result}");
    let definition = &result["structuredContent"]["tools"][0];
    assert!(definition["inputSchema"]["properties"].get("text").is_some(), "a full definition: {definition}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("JSON text");
    assert_eq!(text, result["structuredContent"], "the same JSON as text");
    // What policy denies here is never found.
    let sums = found(&call("search_tools", json!({"query": "sum"})).send(&app).await.result());
    assert!(!sums.iter().any(|n| n == "sum"), "{sums:?}");

    let echoed = call("call_tool", json!({"name": "echo", "arguments": {"text": "through search"}})).send(&app).await;
    assert_eq!(echoed.result()["content"][0]["text"], "through search");
    let denied = assert_error(
        &call("call_tool", json!({"name": "sum", "arguments": {"numbers": [1]}})).send(&app).await,
        200,
        -32600,
    );
    assert_eq!(denied["error"]["data"]["rule"], "find-no-sum", "the same policy as a direct call: {denied}");
    // The root is not a search server: the two names mean nothing there.
    assert_error(
        &Req::modern("tools/call", json!({"name": "search_tools", "arguments": {"query": "echo"}})).send(&app).await,
        200,
        -32602,
    );
}

#[tokio::test]
async fn bad_search_and_call_arguments_are_invalid_params() {
    let app = app(with_search(config())).await;
    // search_tools's own arguments are a tool's: refused as its result, for the model (SEP-1303).
    for (arguments, says) in [(json!({}), "`query` is required"), (json!({"query": "x", "limit": 0}), "limit")] {
        let result = call("search_tools", arguments.clone()).send(&app).await.result();
        assert_eq!(result["isError"], true, "{arguments}: {result}");
        assert!(result["content"][0]["text"].as_str().is_some_and(|t| t.contains(says)), "{arguments}: {result}");
    }
    // call_tool's name which tool is called: finding it is the protocol's (-32602).
    for (name, arguments, says) in [
        ("call_tool", json!({}), "`name` is required"),
        ("call_tool", json!({"name": "call_tool"}), "call_tool"),
        ("call_tool", json!({"name": "echo", "arguments": [1]}), "arguments"),
        ("call_tool", json!({"name": "no_such_tool"}), "Unknown tool"),
    ] {
        let error = assert_error(&call(name, arguments.clone()).send(&app).await, 200, -32602);
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{name} {arguments}: {error}");
    }
}

#[tokio::test]
async fn a_legacy_session_searches_and_calls_too() {
    let app = app(with_search(config())).await;
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
    let resp = Req::legacy("initialize", params, None).at(FIND).send(&app).await;
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    let list = Req::legacy("tools/list", json!({}), Some(&session)).at(FIND).send(&app).await.result();
    assert_eq!(list["tools"].as_array().map(Vec::len), Some(2), "{list}");
    let search = json!({"name": "search_tools", "arguments": {"query": "echo text"}});
    let result = Req::legacy("tools/call", search, Some(&session)).at(FIND).send(&app).await.result();
    assert!(found(&result).iter().any(|n| n == "echo"), "{result}");
    let inner = json!({"name": "call_tool", "arguments": {"name": "echo", "arguments": {"text": "legacy"}}});
    let result = Req::legacy("tools/call", inner, Some(&session)).at(FIND).send(&app).await.result();
    assert_eq!(result["content"][0]["text"], "legacy", "{result}");
}
