//! Reading an upstream's lists: only the lists its capabilities declare are asked for, an
//! unknown method (HTTP 404 with a JSON-RPC error, as 2026-07-28 answers it) means "not
//! supported", never "down", one list failing does not drop the others, and a 2026-07-28
//! server that refuses the first request's version (-32022) is asked again in that version.

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use mcpgate_upstream::{BreakerState, Upstream, UpstreamConfig};

use crate::stand_in::{Answer, StandIn};

fn tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}

fn discover(id: &Value, capabilities: Value) -> Answer {
    Answer::result(
        id,
        json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": capabilities,
               "ttlMs": 0, "cacheScope": "public"}),
    )
}

fn list(id: &Value, member: &str, items: Value) -> Answer {
    let mut result = json!({"resultType": "complete", "ttlMs": 0, "cacheScope": "public"});
    result[member] = items;
    Answer::result(id, result)
}

fn not_found(id: &Value) -> Answer {
    Answer::error(404, id, -32601, "Method not found")
}

fn upstream(url: &str) -> Upstream {
    Upstream::new(UpstreamConfig::http("up", url)).unwrap()
}

#[tokio::test]
async fn only_the_lists_a_modern_server_declares_are_read() {
    let server = StandIn::start(|body| {
        let id = &body["id"];
        match body["method"].as_str() {
            Some("server/discover") => discover(id, json!({"tools": {}})),
            Some("tools/list") => list(id, "tools", json!([tool("add")])),
            _ => not_found(id),
        }
    })
    .await;
    let up = upstream(&server.url);
    let lists = up.lists(&CancellationToken::new()).await.expect("the upstream is up");
    assert_eq!(lists.tools.len(), 1, "{lists:?}");
    assert_eq!(server.methods(), ["server/discover", "tools/list"], "nothing undeclared is asked");
    assert_eq!(up.breaker_state(), BreakerState::Closed);
}

#[tokio::test]
async fn a_list_the_server_does_not_serve_is_empty_and_the_others_are_kept() {
    let server = StandIn::start(|body| {
        let id = &body["id"];
        match body["method"].as_str() {
            Some("server/discover") => discover(id, json!({"tools": {}, "prompts": {}, "resources": {}})),
            Some("tools/list") => list(id, "tools", json!([tool("add"), tool("sub")])),
            // Declared, yet unknown (404 + -32601), or failing: neither drops the tools.
            Some("prompts/list") => not_found(id),
            Some("resources/list") => Answer::error(200, id, -32603, "internal error"),
            Some("resources/templates/list") => list(id, "resourceTemplates", json!([])),
            _ => not_found(id),
        }
    })
    .await;
    let up = upstream(&server.url);
    let lists = up.lists(&CancellationToken::new()).await.expect("a missing list does not make the upstream down");
    assert_eq!(lists.tools.len(), 2, "{lists:?}");
    assert!(lists.prompts.is_empty() && lists.resources.is_empty());
    assert_eq!(up.breaker_state(), BreakerState::Closed);
    let errors: u64 =
        up.stats().errors().filter(|(kind, _)| ["unreachable", "protocol"].contains(kind)).map(|(_, n)| n).sum();
    assert_eq!(errors, 0, "no health failure counted");
}

#[tokio::test]
async fn a_legacy_server_is_asked_only_for_what_initialize_declared() {
    let server = StandIn::start(|body| {
        let id = &body["id"];
        match body["method"].as_str() {
            Some("server/discover") => Answer::error(400, id, -32600, "no session"),
            Some("initialize") => Answer::result(
                id,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "legacy", "version": "1"}}),
            ),
            Some("tools/list") => list(id, "tools", json!([tool("add")])),
            _ => Answer::error(200, id, -32601, "Method not found"),
        }
    })
    .await;
    let up = upstream(&server.url);
    let lists = up.lists(&CancellationToken::new()).await.expect("the upstream is up");
    assert_eq!(lists.tools.len(), 1);
    let asked: Vec<String> = server.methods().into_iter().filter(|m| m.ends_with("/list")).collect();
    assert_eq!(asked, ["tools/list"]);
}

#[tokio::test]
async fn a_refused_version_is_retried_and_every_request_carries_client_info() {
    let refused = std::sync::atomic::AtomicBool::new(false);
    let server = StandIn::start(move |body| {
        let id = &body["id"];
        if !refused.swap(true, std::sync::atomic::Ordering::SeqCst) {
            let body = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32022, "message": "Unsupported protocol version",
                              "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"}}});
            return Answer { status: 400, content_type: "application/json", body: body.to_string(), headers: Vec::new() };
        }
        match body["method"].as_str() {
            Some("server/discover") => discover(id, json!({"tools": {}})),
            Some("tools/list") => list(id, "tools", json!([tool("add")])),
            _ => not_found(id),
        }
    })
    .await;
    let up = upstream(&server.url);
    let lists = up.lists(&CancellationToken::new()).await.expect("the upstream is up");
    assert_eq!(lists.tools.len(), 1);
    assert_eq!(server.methods(), ["server/discover", "server/discover", "tools/list"], "no initialize");
    for seen in server.seen() {
        let meta = &seen.body["params"]["_meta"];
        assert_eq!(meta["io.modelcontextprotocol/protocolVersion"], "2026-07-28", "{}", seen.body);
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "mcpgate", "{}", seen.body);
        let declared = &meta["io.modelcontextprotocol/clientCapabilities"];
        for capability in ["elicitation", "sampling", "roots"] {
            assert!(declared[capability].is_object(), "{capability} on {}", seen.body);
        }
        let header = seen.headers.iter().find(|(k, _)| k == "mcp-protocol-version").map(|(_, v)| v.as_str());
        assert_eq!(header, Some("2026-07-28"));
    }
}
