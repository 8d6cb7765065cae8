//! The tools of an `auth = "oauth"` upstream, per caller: everyone's lists hold its
//! `<upstream>_connect` stand-in until they connect; a connected caller's list holds the
//! upstream's own tools instead, read with their token and kept per principal; calls (and task
//! runs, with the creator's principal rebuilt) find them for that caller only.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{Catalog, CatalogBuilder, ListRendering, Outcome, ToolCall, ToolContext};
use mcpgate_upstream::{Federation, UpstreamAuth, UpstreamConfig};

use crate::stand_in::{Answer, Seen, StandIn};
use crate::test_connections::TestConnections;

/// A protected 2026-07-28 server: any `Bearer` token is accepted (none: 401) but
/// `narrow-token`, which lacks the scope `files:read` (403); it lists one tool, `whoami`, which
/// answers with the token it came with.
fn protected(seen: &Seen) -> Answer {
    let id = &seen.body["id"];
    let Some(token) = seen.header("authorization").and_then(|v| v.strip_prefix("Bearer ")) else {
        return Answer::status(401).header("www-authenticate", r#"Bearer error="invalid_token""#);
    };
    if token == "narrow-token" {
        return Answer::status(403)
            .header("www-authenticate", r#"Bearer error="insufficient_scope", scope="files:read""#);
    }
    match seen.method() {
        "server/discover" => Answer::result(
            id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
                   "serverInfo": {"name": "files", "version": "1"}, "ttlMs": 0, "cacheScope": "private"}),
        ),
        "tools/list" => Answer::result(
            id,
            json!({"resultType": "complete", "ttlMs": 30000, "cacheScope": "private",
                   "tools": [{"name": "whoami", "description": "Who am I", "inputSchema": {"type": "object"}}]}),
        ),
        "tools/call" => {
            Answer::result(id, json!({"resultType": "complete", "content": [{"type": "text", "text": token}]}))
        }
        _ => Answer::error(404, id, -32601, "Method not found"),
    }
}

struct Setup {
    server: StandIn,
    connections: Arc<TestConnections>,
    catalog: Catalog,
    _federation: Federation,
}

async fn setup() -> Setup {
    setup_serving(protected).await
}

async fn setup_serving(answer: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Setup {
    let server = StandIn::start_seeing(answer).await;
    let connections = Arc::new(TestConnections::default());
    let mut config = UpstreamConfig::http("files", &server.url);
    config.auth = UpstreamAuth::Oauth;
    let federation = Federation::new(vec![config], "_").expect("valid");
    federation.set_connections(connections.clone());
    let lists = federation.discover(Duration::from_secs(5)).await;
    let mut builder = CatalogBuilder::default();
    federation.register(&mut builder, &lists);
    let rendering = ListRendering {
        server_info: Arc::new(Implementation::new("mcpgate", "test")),
        ttl_ms: 60_000,
        cache_scope: CacheScope::Public,
        legacy_task_support: true,
    };
    let catalog = builder.build(&rendering).expect("a valid catalog");
    Setup { server, connections, catalog, _federation: federation }
}

fn user(name: &str) -> Principal {
    Principal::new("https://issuer.example/", name, Vec::new())
}

async fn listed(catalog: &Catalog, principal: &Principal) -> (Vec<String>, Value) {
    let bytes = catalog.tools_list(Era::Modern, principal).await.expect("renders");
    let list: Value = serde_json::from_slice(&bytes).expect("json");
    let names = list["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().unwrap().to_owned());
    (names.collect(), list)
}

async fn call(
    catalog: &Catalog,
    name: &str,
    principal: &Principal,
    capabilities: Value,
) -> Outcome<mcpgate_protocol::tool::CallToolResult> {
    let (tool, _) = catalog.find(name, principal).await.expect("a tool of that name for them");
    let capabilities: ClientCapabilities = serde_json::from_value(capabilities).expect("capabilities");
    let cx = ToolContext::detached(principal.clone(), capabilities);
    tool.call(ToolCall { arguments: json!({}), ..ToolCall::default() }, &cx).await
}

fn text(outcome: &Outcome<mcpgate_protocol::tool::CallToolResult>) -> (bool, String) {
    let Outcome::Complete(result) = outcome else { panic!("a tool result, got {outcome:?}") };
    // Relayed results keep the upstream's members as they came: read the serialized result.
    let result = serde_json::to_value(result).expect("json");
    (result["isError"] == true, result["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

#[tokio::test]
async fn a_caller_without_a_connection_sees_only_the_stand_in_which_gives_their_link() {
    let s = setup().await;
    let alice = user("alice");
    let (names, list) = listed(&s.catalog, &alice).await;
    assert_eq!(names, ["files_connect"]);
    assert_eq!(list["cacheScope"], "private", "lists differ per caller: {list}");
    assert!(list["tools"][0]["description"].as_str().unwrap().contains("Connect your own account at files"));
    // Without URL elicitation: the link in a tool error.
    let (is_error, said) = text(&call(&s.catalog, "files_connect", &alice, json!({})).await);
    assert!(is_error && said.contains(&TestConnections::link("files", &alice)), "{said}");
    // With it: one URL elicitation of the same link.
    let asked = call(&s.catalog, "files_connect", &alice, json!({"elicitation": {"url": {}}})).await;
    let Outcome::NeedInput { requests, .. } = asked else { panic!("an input round") };
    let request = serde_json::to_value(requests.values().next().expect("one")).expect("json");
    assert_eq!(request["params"]["url"], TestConnections::link("files", &alice));
    // Any of the upstream's tool names, called without a connection, asks the same.
    let (is_error, said) = text(&call(&s.catalog, "files_whoami", &alice, json!({})).await);
    assert!(is_error && said.contains("/oauth/connect/"), "{said}");
    assert!(s.server.seen().is_empty(), "the upstream is never called without a connection");
}

#[tokio::test]
async fn a_connected_caller_sees_and_calls_the_upstream_tools_with_their_own_token_only() {
    let s = setup().await;
    let (alice, bob) = (user("alice"), user("bob"));
    s.connections.connect(&alice, "alice-token");
    let (names, list) = listed(&s.catalog, &alice).await;
    assert_eq!(names, ["files_whoami"], "the upstream's tools replace the stand-in");
    assert_eq!(list["ttlMs"], 30000, "the upstream's ttlMs, shorter than the gateway's, holds");
    assert_eq!(listed(&s.catalog, &bob).await.0, ["files_connect"], "bob never sees alice's list");
    let (is_error, said) = text(&call(&s.catalog, "files_whoami", &alice, json!({})).await);
    assert!(!is_error && said == "alice-token", "{said}");
    // A task run rebuilds its creator's principal from the task record: the same key.
    let rebuilt = Principal::with_credential("https://issuer.example/", "alice", Vec::new(), None);
    assert_eq!(text(&call(&s.catalog, "files_whoami", &rebuilt, json!({})).await).1, "alice-token");
    let (is_error, said) = text(&call(&s.catalog, "files_whoami", &bob, json!({})).await);
    assert!(is_error && said.contains(&TestConnections::link("files", &bob)), "bob is asked to connect: {said}");
    assert!(s.catalog.find("files_nothing", &alice).await.is_none(), "not in alice's list: unknown");
    // The list was read once, with alice's token, and kept for her.
    let _ = listed(&s.catalog, &alice).await;
    let lists: Vec<_> = s.server.seen().into_iter().filter(|r| r.method() == "tools/list").collect();
    assert_eq!(lists.len(), 1, "kept per principal");
    assert_eq!(lists[0].header("authorization"), Some("Bearer alice-token"));
    let seen: Vec<_> =
        s.server.seen().iter().map(|r| (r.method().to_owned(), r.header("authorization").map(str::to_owned))).collect();
    assert!(seen.iter().all(|(_, a)| a.as_deref() == Some("Bearer alice-token")), "{seen:?}");
}

#[tokio::test]
async fn a_caller_who_declines_the_link_is_told_so_rather_than_asked_again() {
    let s = setup().await;
    let alice = user("alice");
    let (tool, _) = s.catalog.find("files_connect", &alice).await.expect("the stand-in");
    let capabilities: ClientCapabilities = serde_json::from_value(json!({"elicitation": {"url": {}}})).unwrap();
    let cx = ToolContext::detached(alice.clone(), capabilities);
    let Outcome::NeedInput { requests, state } = tool.call(ToolCall::default(), &cx).await else {
        panic!("an input round")
    };
    let key = requests.keys().next().expect("one").clone();
    let mut retry = ToolCall { state, ..ToolCall::default() };
    let declined = serde_json::from_value(json!({"action": "decline"})).expect("an elicitation result");
    retry.input_responses.insert(key, mcpgate_protocol::input::InputResponse::Elicitation(declined));
    let (is_error, said) = text(&tool.call(retry, &cx).await);
    assert!(is_error && said.contains("did not connect"), "{said}");
}

#[tokio::test]
async fn a_connected_caller_whose_token_lacks_scope_is_asked_to_connect_again_by_the_stand_in() {
    let s = setup().await;
    let alice = user("alice");
    s.connections.connect(&alice, "narrow-token");
    let (names, _) = listed(&s.catalog, &alice).await;
    assert_eq!(names, ["files_connect"], "her tools cannot be read: the stand-in stays");
    // Calling it must not claim she is connected (her list would never come): it asks again,
    // the connections having heard of the upstream's 403 and the scope it wants.
    let (is_error, said) = text(&call(&s.catalog, "files_connect", &alice, json!({})).await);
    assert!(is_error && said.contains(&TestConnections::link("files", &alice)), "{said}");
    let refusals = s.connections.refusals();
    let last = refusals.last().expect("the 403 was reported");
    assert_eq!((last.1.as_str(), last.2), ("narrow-token", mcpgate_upstream::oauth::Refusal::Forbidden));
    let challenge = last.3.as_ref().expect("with its challenge");
    assert!(challenge.insufficient_scope() && challenge.scope.as_deref() == Some("files:read"), "{last:?}");
}

#[tokio::test]
async fn a_caller_whose_list_cannot_be_read_gets_an_error_and_no_unlisted_tool_is_called() {
    // The upstream fails every list read (its tools list is down) but would answer calls.
    let s = setup_serving(|seen: &Seen| match seen.method() {
        "tools/list" => Answer::status(500),
        _ => protected(seen),
    })
    .await;
    let alice = user("alice");
    s.connections.connect(&alice, "alice-token");
    for name in ["files_whoami", "files_anything"] {
        let (is_error, said) = text(&call(&s.catalog, name, &alice, json!({})).await);
        assert!(is_error && said.contains("files") && said.contains("again"), "{name}: {said}");
    }
    let calls: Vec<String> = s.server.methods().into_iter().filter(|m| m == "tools/call").collect();
    assert!(calls.is_empty(), "a tool not known from the caller's list is never called: {:?}", s.server.methods());
}
