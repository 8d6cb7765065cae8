//! A call that needs its caller to open a URL first (connecting their account at an
//! `auth = "oauth"` upstream) is asked in the client's own era: a 2026-07-28 client gets
//! `input_required` with the URL elicitation and simply retries; a 2025-11-25 client that
//! declared URL elicitation gets -32042 naming it (even on a call that accepts SSE: no task).

use axum::Router;
use serde_json::{Value, json};

use mcpgate::catalog::{FnTool, Outcome, ToolDescriptor};
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::elicitation::{ElicitParams, ElicitUrlParams};
use mcpgate_protocol::input::{InputRequest, InputRequests};
use mcpgate_protocol::tool::CallToolResult;

use crate::support::{Req, app_with, config};

const LINK: &str = "https://gateway.example/oauth/connect/sealed-link";

/// A tool that, like an oauth upstream's tool without a connection, asks to open the connect
/// link once and completes once answered.
async fn gateway() -> Router {
    let (app, _) = app_with(config(), |b| {
        b.tool(FnTool::new(
            ToolDescriptor::new("needs_account", "Needs a connection", json!({"type": "object"})),
            |call, _| {
                if call.input_responses.contains_key("connect-1") {
                    return Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("connected")]));
                }
                let params = ElicitParams::Url(ElicitUrlParams {
                    mode: "url".to_owned(),
                    message: "Connect your account at files".to_owned(),
                    url: LINK.to_owned(),
                });
                Outcome::NeedInput {
                    requests: InputRequests::from([("connect-1".to_owned(), InputRequest::Elicitation { params })]),
                    state: Some(json!({"asked": "connect-1"})),
                }
            },
        ));
    })
    .await;
    app
}

fn call(extra: Value) -> Req {
    let mut params = json!({"name": "needs_account", "arguments": {}});
    if let Value::Object(extra) = extra {
        params.as_object_mut().expect("object").extend(extra);
    }
    Req::modern_with("tools/call", params, json!({"elicitation": {"url": {}}}))
}

#[tokio::test]
async fn a_modern_client_gets_the_url_elicitation_and_retries_with_its_request_state() {
    let app = gateway().await;
    let first = call(json!({})).send(&app).await.result();
    assert_eq!(first["resultType"], "input_required", "{first}");
    let asked = &first["inputRequests"]["connect-1"];
    assert_eq!(asked["method"], "elicitation/create", "{first}");
    assert_eq!(asked["params"], json!({"mode": "url", "message": "Connect your account at files", "url": LINK}));
    let state = first["requestState"].as_str().expect("a sealed requestState");
    let retry = call(json!({"requestState": state, "inputResponses": {"connect-1": {"action": "accept"}}}))
        .send(&app)
        .await
        .result();
    assert_eq!(retry["resultType"], "complete", "{retry}");
    assert_eq!(retry["content"][0]["text"], "connected");
}

#[tokio::test]
async fn a_legacy_client_that_declared_url_elicitation_gets_32042_naming_the_link() {
    let app = gateway().await;
    let params = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}},
                        "clientInfo": {"name": "legacy", "version": "1"}});
    let resp = Req::legacy("initialize", params, None).send(&app).await;
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    // Accepts SSE (the default here): still no task, the link comes at once.
    let resp =
        Req::legacy("tools/call", json!({"name": "needs_account", "arguments": {}}), Some(&session)).send(&app).await;
    assert_eq!(resp.status.as_u16(), 200);
    let json = resp.json();
    assert_eq!(json["error"]["code"], -32042, "{json}");
    assert_eq!(
        json["error"]["data"]["elicitations"],
        json!([{"mode": "url", "elicitationId": "connect-1", "url": LINK, "message": "Connect your account at files"}])
    );
}
