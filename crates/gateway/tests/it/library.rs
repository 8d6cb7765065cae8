//! mcpgate as a library: a gateway built from a `Config` and Rust tools serves them beside
//! (or instead of) the configured toolsets, and a config built in code is validated.

use serde_json::json;

use mcpgate::{Config, Gateway, Json, StartupError, ToolError, typed_tool};

use crate::support::Req;

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Double {
    /// The number to double.
    n: i64,
}

async fn double(args: Double) -> Result<Json<serde_json::Value>, ToolError> {
    let doubled = args.n.checked_mul(2).ok_or_else(|| ToolError::new("too large to double"))?;
    Ok(Json(json!({ "doubled": doubled })))
}

fn only_code() -> Config {
    Config { toolset: vec![], ..Config::default() }
}

#[tokio::test]
async fn rust_tools_are_served_alone_or_beside_toolsets() {
    let gateway = Gateway::builder(only_code()).tool(typed_tool("double", "Double a number.", double)).build().await;
    let app = gateway.expect("a gateway with one Rust tool").router();
    let tools = Req::modern("tools/list", json!({})).send(&app).await.result();
    assert_eq!(tools["tools"].as_array().map(Vec::len), Some(1), "{tools}");
    assert_eq!(tools["tools"][0]["inputSchema"]["properties"]["n"]["description"], "The number to double.");
    let done = Req::modern("tools/call", json!({"name": "double", "arguments": {"n": 21}})).send(&app).await.result();
    assert_eq!(done["structuredContent"], json!({"doubled": 42}), "{done}");
    let failed =
        Req::modern("tools/call", json!({"name": "double", "arguments": {"n": i64::MAX}})).send(&app).await.result();
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(failed["content"][0]["text"], "too large to double", "{failed}");

    let both = Gateway::builder(Config::default()).tool(typed_tool("double", "Double a number.", double)).build().await;
    let app = both.expect("demo toolset plus a Rust tool").router();
    let tools = Req::modern("tools/list", json!({})).send(&app).await.result();
    let names: Vec<&str> =
        tools["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"double"), "{names:?}");
}

#[tokio::test]
async fn nothing_to_serve_or_an_invalid_config_is_refused() {
    let empty = Gateway::builder(only_code()).build().await;
    assert!(
        matches!(&empty, Err(StartupError::Config { setting, .. }) if setting.contains("toolset")),
        "{:?}",
        empty.err()
    );
    // Multi-replica mode without seal keys: refused before anything connects.
    let config = Config { redis_url: Some("redis://127.0.0.1:1".to_owned()), ..Config::default() };
    let invalid = Gateway::builder(config).build().await;
    assert!(
        matches!(&invalid, Err(StartupError::Config { setting, .. }) if setting.contains("seal.keys")),
        "{:?}",
        invalid.err()
    );
    // Two tools of one name are refused too.
    let twice =
        Gateway::builder(Config::default()).tool(typed_tool("echo", "Not the demo's echo.", double)).build().await;
    assert!(twice.is_err(), "a Rust tool may not shadow a toolset's");
}
