//! Criterion benchmarks of policy evaluation: what ten `[[policy]]` rules cost a call.
//!
//! - a call through ten rules, the last deciding: `Policy::check` with a fresh caller (so the
//!   principal's claims are converted, as once per request) and a tool's arguments;
//! - one rule on the tool's name, the principal already converted (the floor per rule);
//! - one rule on a claim, the principal already converted (a field of a map of maps);
//! - a `tools/list` entry through the same rules (no arguments, the principal converted once
//!   per list, as in a list);
//! - a sync `tools/call` (`echo`) through the router with the ten rules, to set against the
//!   `tools/call echo (router, in process)` of the `requests` bench (no rules).
//!
//! Run: `cargo bench -p mcpgate --bench policy`.

use std::hint::black_box;

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt as _;
use serde_json::{Map, Value, json};
use tokio::time::Instant;
use tower::ServiceExt as _;

use mcpgate::policy::{Arguments, Caller, Effect, Item, Policy, PolicyRule, Use};
use mcpgate::{AppState, Config, Principal};
use mcpgate_protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};

/// Ten rules in the shapes operators write: nine that do not hold for the call benchmarked
/// (claims, scopes, names, an upstream, an argument), and a tenth that allows it.
fn ten_rules() -> Vec<PolicyRule> {
    let deny = Effect::Deny;
    vec![
        PolicyRule::new("no-deletes", "tool.startsWith('delete_')", deny),
        PolicyRule::new("contractors", "principal.claims.role == 'contractor' && upstream == 'github'", deny),
        PolicyRule::new("admin-only", "tool in ['drop_table', 'rotate_keys'] && !('admin' in principal.scopes)", deny),
        PolicyRule::new("no-prod-writes", "has(arguments.env) && arguments.env == 'prod'", deny),
        PolicyRule::new("tenant", "has(principal.claims.tenant) && principal.claims.tenant == 'blocked'", deny),
        PolicyRule::new("issuer", "principal.iss == 'https://untrusted.example'", deny),
        PolicyRule::new("prompts", "method == 'prompts/get' && prompt == 'internal'", deny),
        PolicyRule::new("resources", "resource.startsWith('file:///etc/')", deny),
        PolicyRule::new("bots", "principal.sub.endsWith('-bot') && server == 'internal'", deny),
        PolicyRule::new(
            "support",
            "principal.claims.groups.exists(g, g == 'support') && tool in ['echo', 'sum']",
            Effect::Allow,
        ),
    ]
}

fn principal() -> Principal {
    let claims = json!({
        "iss": "https://auth.example.com", "sub": "alice", "aud": "https://mcp.example.com/mcp",
        "exp": 2_000_000_000u64, "role": "staff", "tenant": "acme", "groups": ["support", "eng"],
        "scope": "tools:read tools:call",
    });
    let Value::Object(claims) = claims else { unreachable!("an object literal") };
    Principal::new("https://auth.example.com", "alice", vec!["tools:read".into(), "tools:call".into()])
        .with_claims(claims)
}

fn benches(c: &mut Criterion) {
    let policy = Policy::from_rules(&ten_rules(), Effect::Deny, false).expect("rules compile");
    let principal = principal();
    let mut arguments = Map::new();
    arguments.insert("text".into(), json!("hello"));
    arguments.insert("env".into(), json!("staging"));

    c.bench_function("policy: a call through ten rules", |b| {
        b.iter(|| {
            let caller = Caller::root(black_box(&principal));
            let used = Use { target: Item::Tool("echo"), upstream: None, arguments: Arguments::Json(&arguments) };
            let decision = policy.check(&caller, black_box(used)).expect("allowed");
            black_box(decision);
        });
    });

    let caller = Caller::root(&principal);
    let one = Policy::from_rules(&[PolicyRule::new("echo", "tool == 'echo'", Effect::Allow)], Effect::Deny, false)
        .expect("compiles");
    c.bench_function("policy: one rule on the tool's name", |b| {
        b.iter(|| {
            let used = Use { target: Item::Tool("echo"), upstream: None, arguments: Arguments::None };
            black_box(one.check(&caller, black_box(used)).expect("allowed"));
        });
    });

    let claim = Policy::from_rules(
        &[PolicyRule::new("role", "principal.claims.role == 'staff'", Effect::Allow)],
        Effect::Deny,
        false,
    )
    .expect("compiles");
    c.bench_function("policy: one rule on a claim", |b| {
        b.iter(|| {
            let used = Use { target: Item::Tool("echo"), upstream: None, arguments: Arguments::None };
            black_box(claim.check(&caller, black_box(used)).expect("allowed"));
        });
    });

    c.bench_function("policy: a tools/list entry through ten rules", |b| {
        b.iter(|| {
            let used = Use { target: Item::Tool("sum"), upstream: None, arguments: Arguments::None };
            black_box(policy.shows(&caller, black_box(used)));
        });
    });

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let mut config = Config { toolset: vec!["demo".to_owned()], ..Config::default() };
    config.policy_default = Effect::Deny;
    config.policy = ten_rules();
    // auth = none: the anonymous caller has no claims, so the tenth rule is made to allow it.
    if let Some(last) = config.policy.last_mut() {
        last.when = "principal.sub == 'anonymous' && tool in ['echo', 'sum']".to_owned();
    }
    let app = rt.block_on(async { mcpgate::app(AppState::new(config).await.expect("state")) });
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}},{meta}}}}}"#
    );
    let request = || {
        Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("host", "localhost")
            .header(MCP_PROTOCOL_VERSION, "2026-07-28")
            .header(MCP_METHOD, "tools/call")
            .header(MCP_NAME, "echo")
            .body(Body::from(body.clone()))
            .expect("request")
    };
    c.bench_function("tools/call echo through ten rules (router, in process)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let req = request();
                    let resp = app.clone().oneshot(req).await.expect("infallible");
                    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
                    black_box(bytes);
                }
                start.elapsed()
            })
        })
    });
    // Checked once, outside the timing: the router bench measured allowed calls.
    let allowed = rt.block_on(async {
        let req = request();
        let resp = app.clone().oneshot(req).await.expect("infallible");
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        serde_json::from_slice::<Value>(&bytes).expect("JSON")
    });
    assert!(allowed.get("result").is_some(), "the benchmarked call is allowed: {allowed}");
}

criterion_group!(policy, benches);
criterion_main!(policy);
