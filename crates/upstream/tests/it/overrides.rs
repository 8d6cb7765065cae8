//! Tool overrides through the federation and the catalog, against a stand-in upstream: the
//! renamed, re-described tool is what lists show (shared and per-caller lists alike); a call by
//! the exposed name reaches the upstream by its own name with defaults filled and hidden values
//! injected; a caller naming a hidden argument is refused before anything is sent.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{Catalog, CatalogBuilder, Failure, ListRendering, Outcome, ToolCall, ToolContext};
use mcpgate_upstream::{Federation, ToolOverride, UpstreamAuth, UpstreamConfig};

use crate::stand_in::{Answer, Seen, StandIn};
use crate::test_connections::TestConnections;

/// A 2026-07-28 server with one tool, `send`: `to` (required, mirrored as `Mcp-Param-To`),
/// `body` (required), `urgent` (optional); it answers with the arguments it got.
fn mailer(seen: &Seen) -> Answer {
    let id = &seen.body["id"];
    match seen.method() {
        "server/discover" => Answer::result(
            id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "mail", "version": "1"}, "ttlMs": 0, "cacheScope": "private"}),
        ),
        "tools/list" => Answer::result(
            id,
            json!({"resultType": "complete", "ttlMs": 30000, "cacheScope": "private", "tools": [{
                "name": "send", "title": "Send", "description": "Sends mail",
                "inputSchema": {"type": "object", "required": ["to", "body"], "properties": {
                    "to": {"type": "string", "x-mcp-header": "To"},
                    "body": {"type": "string"},
                    "urgent": {"type": "boolean"},
                }},
                "annotations": {"destructiveHint": true},
            }]}),
        ),
        "tools/call" => {
            let got = seen.body["params"]["arguments"].to_string();
            Answer::result(id, json!({"resultType": "complete", "content": [{"type": "text", "text": got}]}))
        }
        _ => Answer::error(404, id, -32601, "Method not found"),
    }
}

fn override_of_send() -> ToolOverride {
    serde_json::from_value(json!({
        "rename": "notify_ops",
        "description": "Tells the ops team",
        "annotations": {"destructiveHint": false},
        "hidden": {"to": "ops@example.com"},
        "defaults": {"urgent": false},
    }))
    .expect("an override")
}

async fn catalog_of(config: UpstreamConfig, connections: Option<Arc<TestConnections>>) -> (Catalog, Federation) {
    let federation = Federation::new(vec![config], "_").expect("valid");
    if let Some(connections) = connections {
        federation.set_connections(connections);
    }
    let lists = federation.discover(Duration::from_secs(5)).await;
    let mut builder = CatalogBuilder::default();
    federation.register(&mut builder, &lists);
    let rendering = ListRendering {
        server_info: Arc::new(Implementation::new("mcpgate", "test")),
        ttl_ms: 60_000,
        cache_scope: CacheScope::Public,
        legacy_task_support: true,
    };
    (builder.build(&rendering).expect("a valid catalog"), federation)
}

fn user(name: &str) -> Principal {
    Principal::new("https://issuer.example/", name, Vec::new())
}

async fn tools(catalog: &Catalog, era: Era, principal: &Principal) -> Vec<Value> {
    let bytes = catalog.tools_list(era, principal).await.expect("renders");
    let list: Value = serde_json::from_slice(&bytes).expect("json");
    list["tools"].as_array().expect("tools").clone()
}

async fn call(catalog: &Catalog, name: &str, principal: &Principal, arguments: Value) -> Outcome<Value> {
    let (tool, _) = catalog.find(name, principal).await.expect("a tool of that name");
    let cx = ToolContext::detached(principal.clone(), ClientCapabilities::default());
    match tool.call(ToolCall { arguments, ..ToolCall::default() }, &cx).await {
        Outcome::Complete(result) => {
            let result = serde_json::to_value(result).expect("json");
            let text = result["content"][0]["text"].as_str().expect("text");
            Outcome::Complete(serde_json::from_str(text).expect("the arguments the upstream got"))
        }
        Outcome::Failed(failure) => Outcome::Failed(failure),
        Outcome::NeedInput { .. } => panic!("no input round expected"),
    }
}

/// The one tool in `tools`, checked to be the overridden `send`.
fn assert_overridden(tools: &[Value]) {
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, ["notify_ops"], "renamed as written, no prefix; the upstream's name is gone");
    let tool = &tools[0];
    assert_eq!(tool["description"], "Tells the ops team");
    assert_eq!(tool["title"], "Send", "unset keys keep the upstream's");
    assert_eq!(tool["annotations"]["destructiveHint"], false);
    let schema = &tool["inputSchema"];
    assert!(schema["properties"].get("to").is_none(), "the hidden argument is not advertised: {schema}");
    assert_eq!(schema["required"], json!(["body"]));
    assert_eq!(schema["properties"]["urgent"]["default"], false);
}

#[tokio::test]
async fn an_overridden_tool_is_listed_and_called_as_the_operator_said() {
    let server = StandIn::start_seeing(mailer).await;
    let mut config = UpstreamConfig::http("mail", &server.url);
    config.overrides.insert("send".to_owned(), override_of_send());
    let (catalog, _federation) = catalog_of(config, None).await;
    let alice = user("alice");
    for era in [Era::Modern, Era::Legacy] {
        assert_overridden(&tools(&catalog, era, &alice).await);
    }
    assert!(catalog.find("mail_send", &alice).await.is_none(), "only the rename finds it");

    let Outcome::Complete(got) = call(&catalog, "notify_ops", &alice, json!({"body": "disk full"})).await else {
        panic!("a result")
    };
    assert_eq!(got, json!({"body": "disk full", "urgent": false, "to": "ops@example.com"}));
    let Outcome::Complete(got) = call(&catalog, "notify_ops", &alice, json!({"body": "b", "urgent": true})).await
    else {
        panic!("a result")
    };
    assert_eq!(got["urgent"], true, "a value the caller sent wins over the default");
    let calls: Vec<Seen> = server.seen().into_iter().filter(|s| s.method() == "tools/call").collect();
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].body["params"]["name"], "send", "the upstream is called by its own name");
    assert_eq!(calls[0].header("mcp-param-to"), Some("ops@example.com"), "mirrored from the injected value");

    let refused = call(&catalog, "notify_ops", &alice, json!({"body": "b", "to": "me@example.com"})).await;
    let Outcome::Failed(Failure::InvalidParams(why)) = refused else { panic!("invalid params, got {refused:?}") };
    assert!(why.contains("\"to\"") && why.contains("notify_ops"), "{why}");
    let (tool, _) = catalog.find("notify_ops", &alice).await.expect("found");
    assert!(tool.check(&json!({"to": "x"})).is_err(), "refused before a task is created too");
    assert_eq!(server.seen().iter().filter(|s| s.method() == "tools/call").count(), 2, "nothing more was sent");
}

#[tokio::test]
async fn an_oauth_upstream_s_personal_tools_are_overridden_too() {
    let server = StandIn::start_seeing(|seen: &Seen| {
        if seen.header("authorization").is_none() {
            return Answer::status(401).header("www-authenticate", r#"Bearer error="invalid_token""#);
        }
        mailer(seen)
    })
    .await;
    let mut config = UpstreamConfig::http("mail", &server.url);
    config.auth = UpstreamAuth::Oauth;
    config.overrides.insert("send".to_owned(), override_of_send());
    let connections = Arc::new(TestConnections::default());
    let (catalog, _federation) = catalog_of(config, Some(connections.clone())).await;
    let alice = user("alice");
    connections.connect(&alice, "alice-token");
    assert_overridden(&tools(&catalog, Era::Modern, &alice).await);
    assert!(catalog.find("mail_send", &alice).await.is_none(), "only the rename finds it");
    let Outcome::Complete(got) = call(&catalog, "notify_ops", &alice, json!({"body": "hi"})).await else {
        panic!("a result")
    };
    assert_eq!(got["to"], "ops@example.com");
    // A task run rebuilds its creator's principal: the same tool, the same injection.
    let rebuilt = Principal::with_credential("https://issuer.example/", "alice", Vec::new(), None);
    let Outcome::Complete(got) = call(&catalog, "notify_ops", &rebuilt, json!({"body": "again"})).await else {
        panic!("a result")
    };
    assert_eq!(got, json!({"body": "again", "urgent": false, "to": "ops@example.com"}));
}

/// An upstream older than SEP-1303 refuses bad arguments with -32602: to a `tools/call` that is
/// the tool's refusal of its arguments, answered as a result with `isError` that the model
/// reads (the gateway's `refused_arguments_as_result`), not a protocol error.
#[tokio::test]
async fn an_upstreams_refusal_of_arguments_is_a_tool_result_the_model_reads() {
    let server = StandIn::start_seeing(|seen: &Seen| match seen.method() {
        "tools/call" => Answer::error(200, &seen.body["id"], -32602, "Invalid arguments: body is required"),
        _ => mailer(seen),
    })
    .await;
    let (catalog, _federation) = catalog_of(UpstreamConfig::http("mail", &server.url), None).await;
    let alice = user("alice");
    let (tool, _) = catalog.find("mail_send", &alice).await.expect("the federated tool");
    let cx = ToolContext::detached(alice.clone(), ClientCapabilities::default());
    let call = ToolCall { arguments: json!({"to": "a@example.com"}), ..ToolCall::default() };
    let outcome = tool.call(call, &cx).await;
    assert!(
        matches!(&outcome, Outcome::Failed(Failure::InvalidArguments(m)) if m.contains("body is required")),
        "{outcome:?}"
    );
    let Outcome::Complete(result) = outcome.refused_arguments_as_result() else { panic!("a result") };
    let result = serde_json::to_value(result).expect("json");
    assert_eq!(result["isError"], true, "{result}");
    assert!(result["content"][0]["text"].as_str().is_some_and(|t| t.contains("body is required")), "{result}");
}
