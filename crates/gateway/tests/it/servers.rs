//! Virtual servers (`[[server]]`): each serves its selection of the catalog on its own path,
//! under its own rules, with its own `server/discover`, `initialize`, protected resource
//! metadata and tasks. Driven in-process with the memory store, in both eras.

use axum::Router;
use serde_json::{Value, json};

use mcpgate::Config;
use mcpgate::config::{Effect, VirtualServer};
use mcpgate::policy::PolicyRule;
use mcpgate_store::testing::wait::{Look, wait_for};

use crate::support::{AUD, Req, app, assert_error, claims, config, error_text, hs, hs256_config, initialize};

const OPS: &str = "/servers/ops/mcp";
const DOCS: &str = "/docs/mcp";
const EXT: &str = "io.modelcontextprotocol/tasks";

fn strings(globs: &[&str]) -> Vec<String> {
    globs.iter().map(|g| (*g).to_owned()).collect()
}

/// `ops` (default path): echo, sum and the slow tools, one prompt, the static resources, a rule
/// of its own; `docs` (own path): prompts and resources only, its own title.
fn with_servers(mut c: Config) -> Config {
    let mut ops = VirtualServer::new("ops");
    ops.title = Some("Operations".to_owned());
    ops.instructions = Some("Use ops tools with care".to_owned());
    ops.tools = strings(&["echo", "sum", "slow_*"]);
    ops.prompts = strings(&["test_simple_prompt"]);
    ops.resources = strings(&["test://static-*"]);
    ops.policy = vec![
        PolicyRule::new("ops-no-sum", "tool == 'sum' && server == 'ops'", Effect::Deny).with_message("no sums in ops"),
    ];
    let mut docs = VirtualServer::new("docs");
    docs.path = Some(DOCS.to_owned());
    docs.description = Some("Reading matter".to_owned());
    docs.tools = strings(&["slow_compute"]);
    docs.prompts = strings(&["*"]);
    docs.resources = strings(&["*"]);
    c.servers = vec![ops, docs];
    c
}

fn names(result: &Value, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {result}"))
        .iter()
        .map(|e| e["uri"].as_str().or(e["uriTemplate"].as_str()).or(e["name"].as_str()).unwrap_or("").to_owned())
        .collect()
}

async fn list(app: &Router, path: &str, method: &str, key: &str) -> Vec<String> {
    let mut got = names(&Req::modern(method, json!({})).at(path).send(app).await.result(), key);
    got.sort();
    got
}

#[tokio::test]
async fn a_server_lists_only_its_bundle_and_the_root_everything() {
    let app = app(with_servers(config())).await;
    // `sum` is selected, but its own rule denies it there: a list shows only what may be used.
    assert_eq!(list(&app, OPS, "tools/list", "tools").await, ["echo", "slow_compute", "slow_report"]);
    assert_eq!(list(&app, OPS, "prompts/list", "prompts").await, ["test_simple_prompt"]);
    let resources = list(&app, OPS, "resources/list", "resources").await;
    assert!(!resources.is_empty() && resources.iter().all(|r| r.starts_with("test://static-")), "{resources:?}");
    assert_eq!(list(&app, DOCS, "tools/list", "tools").await, ["slow_compute"]);
    let root_tools = list(&app, "/mcp", "tools/list", "tools").await;
    assert!(root_tools.len() > 3 && root_tools.contains(&"fail".to_owned()), "{root_tools:?}");
    let root_prompts = list(&app, "/mcp", "prompts/list", "prompts").await;
    assert_eq!(list(&app, DOCS, "prompts/list", "prompts").await, root_prompts, "[\"*\"] selects all");
    // A server's lists are its own: never the root's cached page.
    let page = Req::modern("tools/list", json!({})).at(OPS).send(&app).await.result();
    assert_eq!(page["cacheScope"], "private", "{page}");
}

#[tokio::test]
async fn outside_its_selection_a_tool_prompt_or_resource_is_unknown_there_but_served_at_the_root() {
    let app = app(with_servers(config())).await;
    let fail = || Req::modern("tools/call", json!({"name": "fail", "arguments": {}}));
    let unknown = assert_error(&fail().at(OPS).send(&app).await, 200, -32602);
    assert!(unknown["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool: fail")), "{unknown}");
    assert!(unknown["error"].get("data").is_none_or(|d| d.get("rule").is_none()), "not a denial: {unknown}");
    assert_eq!(fail().send(&app).await.result()["isError"], true, "the root runs it");
    let echo = Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).at(OPS);
    assert_eq!(echo.send(&app).await.result()["content"][0]["text"], "hi");
    // docs has no echo; ops has no other prompt; no resource outside its globs.
    let no_echo = Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).at(DOCS);
    assert_error(&no_echo.send(&app).await, 200, -32602);
    let all_prompts = list(&app, "/mcp", "prompts/list", "prompts").await;
    let other = all_prompts.iter().find(|p| *p != "test_simple_prompt").expect("the catalog has other prompts");
    let prompt = Req::modern("prompts/get", json!({"name": other})).at(OPS).send(&app).await;
    assert!(
        assert_error(&prompt, 200, -32602)["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown prompt"))
    );
    let completion = json!({"ref": {"type": "ref/prompt", "name": other}, "argument": {"name": "x", "value": ""}});
    assert_error(&Req::modern("completion/complete", completion).at(OPS).send(&app).await, 200, -32602);
    let all_resources = list(&app, "/mcp", "resources/list", "resources").await;
    let outside = all_resources.iter().find(|r| !r.starts_with("test://static-")).expect("another resource");
    let read = Req::modern("resources/read", json!({"uri": outside})).at(OPS).send(&app).await;
    assert_eq!(assert_error(&read, 200, -32602)["error"]["data"]["uri"], outside.as_str());
    let read = Req::modern("resources/read", json!({"uri": outside})).send(&app).await;
    assert!(read.result().get("contents").is_some(), "the root reads it");
}

#[tokio::test]
async fn a_servers_own_rule_denies_what_the_root_allows() {
    let app = app(with_servers(config())).await;
    let sum = || Req::modern("tools/call", json!({"name": "sum", "arguments": {"numbers": [1, 2]}}));
    let denied = assert_error(&sum().at(OPS).send(&app).await, 200, -32600);
    assert_eq!(denied["error"]["data"]["rule"], "ops-no-sum", "{denied}");
    assert!(denied["error"]["message"].as_str().is_some_and(|m| m.contains("no sums in ops")), "{denied}");
    assert!(sum().send(&app).await.result().get("content").is_some(), "the root's rules allow it");
    // The rule names `server`: it holds only there (docs does not select sum at all).
    assert_error(&sum().at(DOCS).send(&app).await, 200, -32602);
    let metrics = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
    assert!(metrics.contains("mcpgate_policy_denials_total{server=\"ops\",rule=\"ops-no-sum\"} 1"), "{metrics}");
    assert!(metrics.contains("mcpgate_policy_denials_total{server=\"\",rule=\"default\"} 0"), "{metrics}");
    assert_eq!(metrics.matches("# TYPE mcpgate_policy_denials_total").count(), 1, "one header");
}

#[tokio::test]
async fn discover_and_initialize_carry_the_servers_own_title_and_instructions() {
    let mut c = with_servers(config());
    c.server.instructions = Some("Root instructions".to_owned());
    let app = app(c).await;
    let discover = |path: &str| Req::modern("server/discover", json!({})).at(path);
    let ops = discover(OPS).send(&app).await.result();
    assert_eq!(ops["instructions"], "Use ops tools with care", "{ops}");
    let info = &ops["_meta"]["io.modelcontextprotocol/serverInfo"];
    assert!(info.to_string().contains("Operations"), "its title: {ops}");
    let docs = discover(DOCS).send(&app).await.result();
    assert!(docs.get("instructions").is_none_or(Value::is_null), "the root's are not inherited: {docs}");
    assert!(docs["capabilities"].get("tools").is_some() && docs["capabilities"].get("prompts").is_some(), "{docs}");
    assert_eq!(discover("/mcp").send(&app).await.result()["instructions"], "Root instructions");

    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}});
    let resp = Req::legacy("initialize", params.clone(), None).at(OPS).send(&app).await;
    let result = resp.result();
    assert_eq!(result["serverInfo"]["title"], "Operations", "{result}");
    assert_eq!(result["serverInfo"]["name"], "ops", "{result}");
    assert_eq!(result["instructions"], "Use ops tools with care");
    // Its session serves it, and is refused (clearly) on another endpoint.
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    let tools = Req::legacy("tools/list", json!({}), Some(&session)).at(OPS).send(&app).await.result();
    assert_eq!(names(&tools, "tools").len(), 3, "{tools}");
    for path in ["/mcp", DOCS] {
        let elsewhere = Req::legacy("tools/list", json!({}), Some(&session)).at(path).send(&app).await;
        let error = assert_error(&elsewhere, 404, -32600);
        assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("virtual server \"ops\"")), "{error}");
    }
    let (root_session, _) = initialize(&app, "2025-11-25").await;
    let at_ops = Req::legacy("tools/list", json!({}), Some(&root_session)).at(OPS).send(&app).await;
    let error = assert_error(&at_ops, 404, -32600);
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("root endpoint")), "{error}");
}

#[tokio::test]
async fn each_server_has_its_own_protected_resource_metadata_and_challenge() {
    let app = app(with_servers(hs256_config())).await;
    let doc = Req::get("/.well-known/oauth-protected-resource/servers/ops/mcp").send(&app).await.json();
    assert_eq!(doc["resource"], "https://mcp.example.com/servers/ops/mcp", "{doc}");
    assert_eq!(doc["authorization_servers"][0], "https://auth.example.com", "{doc}");
    let docs = Req::get("/.well-known/oauth-protected-resource/docs/mcp").send(&app).await.json();
    assert_eq!(docs["resource"], "https://mcp.example.com/docs/mcp", "{docs}");
    let root = Req::get("/.well-known/oauth-protected-resource/mcp").send(&app).await.json();
    assert_eq!(root["resource"], AUD, "{root}");

    let challenge = |path: &str| {
        let app = app.clone();
        let path = path.to_owned();
        async move {
            let resp = Req::modern("tools/list", json!({})).at(&path).send(&app).await;
            assert_eq!(resp.status, 401, "{path}");
            resp.header("www-authenticate").expect("a challenge").to_owned()
        }
    };
    let ops = challenge(OPS).await;
    assert!(
        ops.contains(
            "resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/servers/ops/mcp\""
        ),
        "{ops}"
    );
    let root = challenge("/mcp").await;
    assert!(
        root.contains("resource_metadata=\"https://mcp.example.com/.well-known/oauth-protected-resource/mcp\""),
        "{root}"
    );
    // With a token, the server answers.
    let token = format!("Bearer {}", hs(&claims("alice")));
    let tools = Req::modern("tools/list", json!({})).at(OPS).header("authorization", &token).send(&app).await;
    assert_eq!(names(&tools.result(), "tools").len(), 3);
}

#[tokio::test]
async fn a_task_created_through_a_server_is_read_through_it_or_the_root_only() {
    let c = with_servers(hs256_config());
    let app = app(c).await;
    let token = format!("Bearer {}", hs(&claims("alice")));
    let as_alice = |req: Req| req.header("authorization", &token);
    let caps = json!({"extensions": {EXT: {}}});
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 30}});
    let created = as_alice(Req::modern_with("tools/call", call, caps.clone()).at(OPS)).send(&app).await.result();
    let id = created["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let get = |path: &str| as_alice(Req::modern_with("tasks/get", json!({"taskId": id}), caps.clone()).at(path));
    assert_eq!(get(OPS).send(&app).await.result()["taskId"], id.as_str());
    assert_eq!(get("/mcp").send(&app).await.result()["taskId"], id.as_str(), "the root reads its owner's tasks");
    // Through another server it does not exist: exactly an unknown id's answer.
    let elsewhere = get(DOCS).send(&app).await;
    let unknown_id = "t00-AAAAAAAAAAAAAAAAAAAAAA";
    let unknown =
        as_alice(Req::modern_with("tasks/get", json!({"taskId": unknown_id}), caps.clone()).at(DOCS)).send(&app).await;
    let (a, b) = (assert_error(&elsewhere, 200, -32602), assert_error(&unknown, 200, -32602));
    assert_eq!(
        a["error"]["message"].as_str().map(|m| m.replace(&id, unknown_id)),
        b["error"]["message"].as_str().map(str::to_owned)
    );
    let cancel = as_alice(Req::modern_with("tasks/cancel", json!({"taskId": id}), caps.clone()).at(DOCS));
    assert_error(&cancel.send(&app).await, 200, -32602);
    assert_eq!(get(OPS).send(&app).await.result()["status"], "working", "not cancelled from elsewhere");
    // Another owner sees nothing, even through the same server.
    let bob = format!("Bearer {}", hs(&claims("bob")));
    let as_bob =
        Req::modern_with("tasks/get", json!({"taskId": id}), caps.clone()).at(OPS).header("authorization", &bob);
    assert_error(&as_bob.send(&app).await, 200, -32602);
    let cancel = as_alice(Req::modern_with("tasks/cancel", json!({"taskId": id}), caps.clone()).at(OPS));
    cancel.send(&app).await.result();
}

#[tokio::test]
async fn bad_servers_stop_start_up_naming_them() {
    let load = |servers: &str| {
        let text = format!("toolset = [\"demo\"]\n{servers}");
        error_text(mcpgate::config::load_from_str(&text).expect_err(&text))
    };
    let err = load("[[server]]\nname = \"a\"\n[[server]]\nname = \"a\"\npath = \"/a\"\n");
    assert!(err.contains("server \"a\"") && err.contains("two [[server]] tables"), "{err}");
    let err = load("[[server]]\nname = \"a\"\npath = \"/x/mcp\"\n[[server]]\nname = \"b\"\npath = \"/x/mcp\"\n");
    assert!(err.contains("server \"b\" path") && err.contains("another server's path"), "{err}");
    for reserved in ["/mcp", "/.well-known/x", "/oauth/mcp", "/admin", "/healthz", "/metrics/x", "/upstreams/mcp"] {
        let err = load(&format!("[[server]]\nname = \"r\"\npath = \"{reserved}\"\n"));
        assert!(err.contains("server \"r\" path"), "{reserved}: {err}");
    }
    let err = load("[[server]]\nname = \"no/slash\"\n");
    assert!(err.contains("server \"no/slash\"") && err.contains("server name"), "{err}");
    let err = load("[[server]]\nname = \"s\"\ndiscovery = \"grep\"\n");
    assert!(err.contains("server \"s\"") && err.contains("not a valid [[server]] table"), "{err}");
    let bad_rule = "[[server]]\nname = \"ops\"\ntools = [\"*\"]\n[[server.policy]]\nname = \"typo\"\nwhen = \"tol == 'x'\"\neffect = \"deny\"\n";
    let err = load(bad_rule);
    assert!(err.contains("server \"ops\" policy rule \"typo\"") && err.contains("unknown variable `tol`"), "{err}");
    // A good file loads: defaults filled in, rules kept per server.
    let good = "root_endpoint = false\ntoolset = [\"demo\"]\n[[server]]\nname = \"ops\"\ntools = [\"echo\"]\ndiscovery = \"search\"\n[[server.policy]]\nname = \"r\"\nwhen = \"true\"\neffect = \"allow\"\n";
    let loaded = mcpgate::config::load_from_str(good).expect("loads");
    assert!(!loaded.root_endpoint);
    assert_eq!(loaded.servers[0].endpoint_path(), OPS);
    assert_eq!(loaded.servers[0].policy.len(), 1);
    assert_eq!(loaded.servers[0].discovery, mcpgate::config::Discovery::Search);
    // A config built in code is checked when the replica starts.
    let mut c = config();
    let mut bad = VirtualServer::new("code");
    bad.policy = vec![PolicyRule::new("in-code", "nope(tool)", Effect::Deny)];
    c.servers = vec![bad];
    let err = error_text(mcpgate::AppState::new(c).await.expect_err("a bad rule in code"));
    assert!(err.contains("server \"code\" policy rule \"in-code\""), "{err}");
}

#[tokio::test]
async fn without_the_root_endpoint_only_the_servers_serve() {
    let mut c = with_servers(config());
    c.root_endpoint = false;
    let app = app(c).await;
    assert_eq!(Req::modern("tools/list", json!({})).send(&app).await.status, 404);
    assert_eq!(list(&app, OPS, "tools/list", "tools").await.len(), 3);
}

#[tokio::test]
async fn the_audit_trail_names_the_server_of_a_call_and_of_its_task() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.jsonl");
    let mut c = with_servers(config());
    c.audit = mcpgate::config::AuditConfig {
        enabled: true,
        sink: mcpgate::config::AuditSink::File,
        path: Some(path.to_string_lossy().into_owned()),
        include_arguments: false,
    };
    let app = app(c).await;
    let echo = |path: &str| Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}})).at(path);
    echo(OPS).send(&app).await.result();
    echo("/mcp").send(&app).await.result();
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0}});
    let created = Req::modern_with("tools/call", call, json!({"extensions": {EXT: {}}})).at(DOCS).send(&app).await;
    // Answered with its result (it ended within tasks.answer_within_ms), the task's id beside it.
    let answered = created.result();
    assert_eq!(answered["resultType"], "complete", "{answered}");
    let id = answered["_meta"]["io.mcpgate/taskId"].as_str().expect("the task's id in _meta").to_owned();
    // Bounded wait for the lines (the trail is written off the request path).
    let lines = wait_for("the audit lines", std::time::Duration::from_secs(10), async || {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let lines: Vec<Value> = text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
        let created = lines.iter().any(|l| l["event"] == "task.created" && l["task_id"] == id.as_str());
        let call = lines.iter().any(|l| l["name"] == "slow_compute" && l["task_id"] == id.as_str());
        if lines.iter().filter(|l| l["name"] == "echo").count() == 2 && created && call {
            Look::Done(lines)
        } else {
            Look::NotYet(format!("{lines:#?}"))
        }
    })
    .await;
    let servers: Vec<&Value> = lines.iter().filter(|l| l["name"] == "echo").map(|l| &l["server"]).collect();
    assert_eq!(servers, [&json!("ops"), &json!("")], "{lines:#?}");
    let task = lines.iter().find(|l| l["event"] == "task.created" && l["task_id"] == id.as_str()).expect("its line");
    assert_eq!(task["server"], "docs", "{task}");
    // The call's own line names the task it was answered from.
    let call = lines.iter().find(|l| l["name"] == "slow_compute" && l["task_id"] == id.as_str()).expect("its line");
    assert_eq!((&call["outcome"], &call["server"]), (&json!("ok"), &json!("docs")), "{call}");
}

#[test]
fn a_file_with_virtual_servers_writes_its_server_settings_under_gateway() {
    let text = "toolset = [\"demo\"]\n[gateway]\ninstructions = \"Root instructions\"\n[[server]]\nname = \"a\"\n";
    let c = mcpgate::config::load_from_str(text).expect("[gateway] with [[server]]");
    assert_eq!(c.server.instructions.as_deref(), Some("Root instructions"));
    assert_eq!(c.servers.len(), 1);
    let both = "[server]\ninstructions = \"x\"\n[gateway]\ninstructions = \"y\"\n";
    let err = error_text(mcpgate::config::load_from_str(both).expect_err("both names"));
    assert!(err.contains("gateway") && err.contains("one of the two"), "{err}");
    let typo = "[gateway]\ninstructionz = \"x\"\n";
    let err = error_text(mcpgate::config::load_from_str(typo).expect_err("a typo"));
    assert!(err.contains("server.instructionz"), "named as the setting it would be: {err}");
}

#[tokio::test]
async fn the_roots_rules_hold_on_every_server_too() {
    let mut c = with_servers(config());
    c.policy = vec![
        PolicyRule::new("nobody-echoes", "tool == 'echo' && server != 'docs'", Effect::Deny).with_message("no echo"),
    ];
    let app = app(c).await;
    let echo = || Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    // Denied at the root and through ops (the root's rule sees `server`), not listed there.
    for path in ["/mcp", OPS] {
        let denied = assert_error(&echo().at(path).send(&app).await, 200, -32600);
        assert_eq!(denied["error"]["data"]["rule"], "nobody-echoes", "{path}: {denied}");
        assert!(!list(&app, path, "tools/list", "tools").await.contains(&"echo".to_owned()), "{path}");
    }
    // A server's own rule still judges what the root's allow.
    let sum = Req::modern("tools/call", json!({"name": "sum", "arguments": {"numbers": [1, 2]}}));
    assert_eq!(assert_error(&sum.at(OPS).send(&app).await, 200, -32600)["error"]["data"]["rule"], "ops-no-sum");
}

#[tokio::test]
async fn a_token_for_a_server_works_there_and_nowhere_else() {
    let app = app(with_servers(hs256_config())).await;
    let for_ops = {
        let mut c = claims("alice");
        c["aud"] = json!("https://mcp.example.com/servers/ops/mcp");
        format!("Bearer {}", hs(&c))
    };
    let tools = |path: &str, token: &str| Req::modern("tools/list", json!({})).at(path).header("authorization", token);
    assert!(tools(OPS, &for_ops).send(&app).await.result().get("tools").is_some(), "its own audience");
    for path in ["/mcp", DOCS] {
        let resp = tools(path, &for_ops).send(&app).await;
        assert_eq!(resp.status, 401, "{path}: a token for ops");
        assert!(resp.header("www-authenticate").is_some_and(|c| c.contains("invalid_token")), "{path}");
    }
    // The root's audience holds everywhere; an array naming the server does too.
    let root = format!("Bearer {}", hs(&claims("alice")));
    assert!(tools(DOCS, &root).send(&app).await.result().get("tools").is_some());
    let mut both = claims("alice");
    both["aud"] = json!(["https://other.example.com", "https://mcp.example.com/docs/mcp"]);
    let both = format!("Bearer {}", hs(&both));
    assert!(tools(DOCS, &both).send(&app).await.result().get("tools").is_some());
    assert_eq!(tools(OPS, &both).send(&app).await.status, 401);
}

#[tokio::test]
async fn a_glob_over_uris_selects_resources_not_the_templates_that_would_serve_them() {
    let mut c = config();
    let mut reader = VirtualServer::new("reader");
    // Matches URIs the template `test://template/{id}/data` serves, but not the template.
    reader.resources = strings(&["test://template/public*"]);
    c.servers = vec![reader];
    let app = app(c).await;
    let read = |uri: &str| Req::modern("resources/read", json!({"uri": uri})).at("/servers/reader/mcp");
    // (The second is read as its normal form, `test://template/private/data`.)
    for (uri, normal) in [
        ("test://template/public/data", "test://template/public/data"),
        ("test://template/public/../private/data", "test://template/private/data"),
    ] {
        let refused = assert_error(&read(uri).send(&app).await, 200, -32602);
        assert_eq!(refused["error"]["data"]["uri"], normal, "{refused}");
    }
    let root = Req::modern("resources/read", json!({"uri": "test://template/public/data"})).send(&app).await;
    assert!(root.result().get("contents").is_some(), "the root's template serves it");
}

/// The background-task companions (`task_status`, `task_result`, `task_cancel`) hold to the
/// same rule as the tasks methods: through a virtual server, a task created through another
/// server or the root answers exactly as an unknown id, and is not cancelled.
#[tokio::test]
async fn the_background_companions_answer_a_task_made_through_another_endpoint_as_unknown() {
    let mut c = with_servers(hs256_config());
    let mut finance = VirtualServer::new("finance");
    finance.tools = strings(&["background_report", "task_*"]);
    let mut support = VirtualServer::new("support");
    support.tools = strings(&["task_*"]);
    c.servers.extend([finance, support]);
    let app = app(c).await;
    let token = format!("Bearer {}", hs(&claims("alice")));
    let call = |path: &str, tool: &str, arguments: Value| {
        Req::modern("tools/call", json!({"name": tool, "arguments": arguments}))
            .at(path)
            .header("authorization", &token)
    };
    let (finance, support) = ("/servers/finance/mcp", "/servers/support/mcp");
    let unknown_id = "t00-AAAAAAAAAAAAAAAAAAAAAA";
    for (made, elsewhere) in [(finance, support), ("/mcp", support), ("/mcp", finance)] {
        let started =
            call(made, "background_report", json!({"topic": "payroll", "seconds": 30})).send(&app).await.result();
        let id =
            started["structuredContent"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {started}")).to_owned();
        for companion in ["task_status", "task_result", "task_cancel"] {
            let theirs = call(elsewhere, companion, json!({"taskId": id})).send(&app).await.result();
            let unknown = call(elsewhere, companion, json!({"taskId": unknown_id})).send(&app).await.result();
            assert_eq!(theirs["isError"], true, "{companion} through {elsewhere} of a task made at {made}: {theirs}");
            assert_eq!(
                theirs["content"][0]["text"].as_str().map(|t| t.replace(&id, unknown_id)),
                unknown["content"][0]["text"].as_str().map(str::to_owned),
                "{companion} through {elsewhere}: exactly an unknown id's answer"
            );
            assert!(theirs.get("structuredContent").is_none(), "{companion}: nothing of the task shows: {theirs}");
        }
        // Not cancelled from elsewhere: through the endpoint it was made at (and the root) it runs on.
        for path in [made, "/mcp"] {
            let status = call(path, "task_status", json!({"taskId": id})).send(&app).await.result();
            assert_eq!(status["structuredContent"]["status"], "working", "through {path}: {status}");
        }
        let cancelled = call(made, "task_cancel", json!({"taskId": id})).send(&app).await.result();
        assert_ne!(cancelled["isError"], true, "its own endpoint cancels it: {cancelled}");
    }
}
