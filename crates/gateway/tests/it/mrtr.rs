//! Multi-round input without server state (2026-07-28): InputRequiredResult with a sealed,
//! user- and call-bound requestState, answers checked and accumulated across rounds, and
//! every way a state can be misused refused with the same error.

use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};

use crate::support::{Req, app, assert_error, claims, config, hs, hs256_config, initialize};

fn caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

/// A `tools/call` round: `extra` may hold `inputResponses` and `requestState`.
fn tool_call(name: &str, arguments: Value, extra: Value) -> Req {
    let mut params = json!({"name": name, "arguments": arguments});
    if let Value::Object(extra) = extra {
        for (k, v) in extra {
            params[k] = v;
        }
    }
    Req::modern_with("tools/call", params, caps())
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

/// Asserts an InputRequiredResult; returns (its requests, its requestState).
#[track_caller]
fn input_required(result: &Value) -> (Value, String) {
    assert_eq!(result["resultType"], "input_required", "{result}");
    assert!(result.get("content").is_none(), "{result}");
    let state = result["requestState"].as_str().expect("a requestState").to_owned();
    (result["inputRequests"].clone(), state)
}

#[track_caller]
fn text(result: &Value) -> String {
    assert_eq!(result["resultType"], "complete", "{result}");
    result["content"][0]["text"].as_str().expect("text").to_owned()
}

#[tokio::test]
async fn three_rounds_whose_questions_depend_on_earlier_answers() {
    let app = app(config()).await;
    let args = json!({"id": "WI-42"});
    let r1 = tool_call("update_work_item", args.clone(), json!({})).send(&app).await.result();
    let (requests, s1) = input_required(&r1);
    assert_eq!(requests["field"]["method"], "elicitation/create", "{requests}");

    // Round two asks about the chosen field only; the client sends only round one's answer.
    let r2 = tool_call(
        "update_work_item",
        args.clone(),
        json!({"inputResponses": {"field": accept(json!({"field": "status"}))}, "requestState": s1}),
    )
    .send(&app)
    .await
    .result();
    let (requests, s2) = input_required(&r2);
    assert_ne!(s1, s2, "a new state each round");
    let schema = &requests["value"]["params"]["requestedSchema"]["properties"]["value"];
    assert_eq!(
        schema["enum"],
        json!(["open", "in_progress", "done"]),
        "the question depends on the answer: {requests}"
    );
    assert!(requests.get("field").is_none(), "never asked twice: {requests}");

    // Round three (closing needs a resolution); earlier answers come from the state alone.
    let r3 = tool_call(
        "update_work_item",
        args.clone(),
        json!({"inputResponses": {"value": accept(json!({"value": "done"}))}, "requestState": s2}),
    )
    .send(&app)
    .await
    .result();
    let (requests, s3) = input_required(&r3);
    assert!(requests["resolution"].is_object(), "{requests}");

    let done = tool_call(
        "update_work_item",
        args,
        json!({"inputResponses": {"resolution": accept(json!({"resolution": "fixed"}))}, "requestState": s3}),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(text(&done), r#"Work item WI-42 updated: status "open" → "done" (resolution: fixed)"#);
}

#[tokio::test]
async fn missing_answers_ask_again_and_extra_keys_are_ignored() {
    let app = app(config()).await;
    let r1 = tool_call("delete_records", json!({"table": "logs", "older_than_days": 30}), json!({}))
        .send(&app)
        .await
        .result();
    let (_, state) = input_required(&r1);
    // Nothing answered: asked again (a result, not an error).
    let again = tool_call(
        "delete_records",
        json!({"table": "logs", "older_than_days": 30}),
        json!({"inputResponses": {"unrelated": accept(json!({"x": 1}))}, "requestState": state}),
    )
    .send(&app)
    .await
    .result();
    let (requests, state) = input_required(&again);
    assert!(requests["confirm"].is_object());
    // The answer plus junk under keys nobody asked: the junk is ignored.
    let done = tool_call(
        "delete_records",
        json!({"table": "logs", "older_than_days": 30}),
        json!({"inputResponses": {"confirm": accept(json!({"confirm": true})), "junk": 12345}, "requestState": state}),
    )
    .send(&app)
    .await
    .result();
    assert!(text(&done).starts_with("Deleted "), "{done}");
}

#[tokio::test]
async fn a_malformed_answer_to_an_asked_key_is_invalid_params() {
    let app = app(config()).await;
    let r1 =
        tool_call("delete_records", json!({"table": "t", "older_than_days": 1}), json!({})).send(&app).await.result();
    let (_, state) = input_required(&r1);
    for wrong in [json!(12345), json!({"roots": []}), json!({"action": "maybe"})] {
        let resp = tool_call(
            "delete_records",
            json!({"table": "t", "older_than_days": 1}),
            json!({"inputResponses": {"confirm": wrong}, "requestState": state}),
        )
        .send(&app)
        .await;
        let json = assert_error(&resp, 200, -32602);
        assert!(json["error"]["message"].as_str().unwrap_or_default().contains("inputResponses.confirm"), "{json}");
    }
}

/// Every misuse gets exactly this error.
#[track_caller]
fn assert_invalid_state(resp: &crate::support::Resp) {
    let json = assert_error(resp, 200, -32602);
    assert_eq!(json["error"]["message"], "Invalid params: invalid requestState", "no detail leaks: {json}");
    assert!(json["error"].get("data").is_none(), "{json}");
}

#[tokio::test]
async fn tampered_foreign_call_and_expired_states_are_refused() {
    let mut c = config();
    c.seal.request_state_ttl_secs = 1;
    let app = app(c).await;
    let args = json!({"table": "orders", "older_than_days": 7});
    let r1 = tool_call("delete_records", args.clone(), json!({})).send(&app).await.result();
    let (_, state) = input_required(&r1);
    let yes = json!({"confirm": accept(json!({"confirm": true}))});
    let retry = |name: &str, arguments: Value, state: String| {
        tool_call(name, arguments, json!({"inputResponses": yes.clone(), "requestState": state}))
    };

    let mut tampered = state.clone().into_bytes();
    let last = tampered.len() - 2;
    tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
    assert_invalid_state(
        &retry("delete_records", args.clone(), String::from_utf8(tampered).expect("ascii")).send(&app).await,
    );
    assert_invalid_state(&retry("delete_records", args.clone(), format!("{state}-TAMPERED")).send(&app).await);
    assert_invalid_state(&retry("delete_records", args.clone(), "garbage".to_owned()).send(&app).await);
    // Another call: other arguments, another tool, another method.
    let other_args = json!({"table": "orders", "older_than_days": 8});
    assert_invalid_state(&retry("delete_records", other_args, state.clone()).send(&app).await);
    assert_invalid_state(&retry("update_work_item", json!({"id": "orders"}), state.clone()).send(&app).await);
    let prompt = Req::modern_with(
        "prompts/get",
        json!({"name": "test_input_required_result_prompt", "requestState": state.clone()}),
        caps(),
    );
    assert_invalid_state(&prompt.send(&app).await);

    // The genuine state works while it lives...
    let ok = retry("delete_records", args.clone(), state.clone()).send(&app).await.result();
    assert!(text(&ok).starts_with("Deleted "));
    // ...and not after.
    tokio::time::sleep(Duration::from_millis(2100)).await;
    assert_invalid_state(&retry("delete_records", args, state).send(&app).await);

    // Each refusal was counted, by reason.
    let metrics = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
    for reason in ["integrity", "malformed", "expired"] {
        let line = format!("mcpgate_seal_failures_total{{reason=\"{reason}\"}} ");
        let count: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&line))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {line} in metrics"));
        assert!(count >= 1, "{reason}: {count}");
    }
}

async fn as_user(app: &Router, sub: &str, req: Req) -> crate::support::Resp {
    req.header("authorization", &format!("Bearer {}", hs(&claims(sub)))).send(app).await
}

#[tokio::test]
async fn a_state_minted_for_one_user_is_refused_for_another() {
    let app = app(hs256_config()).await;
    let args = json!({"table": "users", "older_than_days": 3});
    let r1 = as_user(&app, "alice", tool_call("delete_records", args.clone(), json!({}))).await.result();
    let (_, state) = input_required(&r1);
    let answer = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state});
    assert_invalid_state(&as_user(&app, "bob", tool_call("delete_records", args.clone(), answer.clone())).await);
    let done = as_user(&app, "alice", tool_call("delete_records", args, answer)).await.result();
    assert!(text(&done).starts_with("Deleted "));
}

#[tokio::test]
async fn single_use_states_refuse_a_replay() {
    let mut c = config();
    c.seal.request_state_single_use = true;
    let app = app(c).await;
    let args = json!({"table": "events", "older_than_days": 2});
    let r1 = tool_call("delete_records", args.clone(), json!({})).send(&app).await.result();
    let (_, state) = input_required(&r1);
    let answer = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state});
    let done = tool_call("delete_records", args.clone(), answer.clone()).send(&app).await.result();
    assert!(text(&done).starts_with("Deleted "));
    assert_invalid_state(&tool_call("delete_records", args, answer).send(&app).await);
}

#[tokio::test]
async fn states_may_be_reused_unless_single_use_is_on() {
    let app = app(config()).await;
    let args = json!({"table": "events", "older_than_days": 2});
    let (_, state) = input_required(&tool_call("delete_records", args.clone(), json!({})).send(&app).await.result());
    let answer = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state});
    for _ in 0..2 {
        let done = tool_call("delete_records", args.clone(), answer.clone()).send(&app).await.result();
        assert!(text(&done).starts_with("Deleted "), "a retry after a lost reply works");
    }
}

#[tokio::test]
async fn only_declared_capabilities_are_asked_for() {
    let app = app(config()).await;
    // summarize_text needs the client's model: without sampling, -32021 naming it.
    let resp = Req::modern_with(
        "tools/call",
        json!({"name": "summarize_text", "arguments": {"text": "Long text."}}),
        json!({"elicitation": {}}),
    )
    .send(&app)
    .await;
    let json = assert_error(&resp, 400, -32021);
    assert!(json["error"]["data"]["requiredCapabilities"]["sampling"].is_object(), "{json}");
    // With sampling it asks the model, then uses its answer.
    let r1 = tool_call("summarize_text", json!({"text": "Long text."}), json!({})).send(&app).await.result();
    let (requests, state) = input_required(&r1);
    assert_eq!(requests["summary"]["method"], "sampling/createMessage");
    let model = json!({"role": "assistant", "content": {"type": "text", "text": " It is short. "}, "model": "m"});
    let done = tool_call(
        "summarize_text",
        json!({"text": "Long text."}),
        json!({"inputResponses": {"summary": model}, "requestState": state}),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(text(&done), "Summary: It is short.");
}

#[tokio::test]
async fn prompts_ask_too_and_lists_never_do() {
    let app = app(config()).await;
    let r1 = Req::modern_with("prompts/get", json!({"name": "test_input_required_result_prompt"}), caps())
        .send(&app)
        .await
        .result();
    let (requests, state) = input_required(&r1);
    assert!(requests["user_context"].is_object());
    let r2 = Req::modern_with(
        "prompts/get",
        json!({"name": "test_input_required_result_prompt", "inputResponses": {"user_context": accept(json!({"context": "tests"}))}, "requestState": state}),
        caps(),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(r2["resultType"], "complete");
    assert!(r2["messages"][0]["content"]["text"].as_str().unwrap_or_default().contains("tests"), "{r2}");
    let tools = Req::modern_with("tools/list", json!({}), caps()).send(&app).await.result();
    assert_eq!(tools["resultType"], "complete");
}

#[tokio::test]
async fn legacy_sessions_are_asked_only_on_a_stream_or_within_tasks() {
    let app = app(config()).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    // Without an SSE stream to send the question on (the e2e tests cover the stream).
    let resp = Req::legacy(
        "tools/call",
        json!({"name": "delete_records", "arguments": {"table": "t", "older_than_days": 1}}),
        Some(&session),
    )
    .header("accept", "application/json")
    .send(&app)
    .await;
    let json = assert_error(&resp, 200, -32603);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("within tasks") && message.contains("text/event-stream"), "{json}");
}

#[tokio::test]
async fn a_confirmation_nobody_asked_for_does_not_count() {
    let app = app(config()).await;
    let args = json!({"table": "t", "older_than_days": 1});
    let unprompted = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}});
    let r1 = tool_call("delete_records", args, unprompted).send(&app).await.result();
    let (requests, _) = input_required(&r1);
    assert!(requests["confirm"].is_object(), "still asked: {r1}");
}

#[tokio::test]
async fn a_rejected_retry_does_not_use_up_a_single_use_state() {
    let mut c = config();
    c.seal.request_state_single_use = true;
    let app = app(c).await;
    let args = json!({"table": "jobs", "older_than_days": 4});
    let (_, state) = input_required(&tool_call("delete_records", args.clone(), json!({})).send(&app).await.result());
    let malformed = json!({"inputResponses": {"confirm": 7}, "requestState": state});
    assert_error(&tool_call("delete_records", args.clone(), malformed).send(&app).await, 200, -32602);
    let answer = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state});
    let done = tool_call("delete_records", args, answer).send(&app).await.result();
    assert!(text(&done).starts_with("Deleted "), "{done}");
}

#[tokio::test]
async fn a_state_minted_through_a_virtual_server_opens_only_there() {
    let mut c = config();
    let mut ops = mcpgate::config::VirtualServer::new("ops");
    ops.tools = vec!["delete_records".to_owned()];
    let mut other = mcpgate::config::VirtualServer::new("other");
    other.tools = vec!["*".to_owned()];
    c.servers = vec![ops, other];
    let app = app(c).await;
    let args = json!({"table": "orders", "older_than_days": 7});
    let at = |path: &str, extra: Value| tool_call("delete_records", args.clone(), extra).at(path);
    let r1 = at("/servers/ops/mcp", json!({})).send(&app).await.result();
    let (_, state) = input_required(&r1);
    let retry = json!({"inputResponses": {"confirm": accept(json!({"confirm": true}))}, "requestState": state});
    for path in ["/mcp", "/servers/other/mcp"] {
        assert_invalid_state(&at(path, retry.clone()).send(&app).await);
    }
    assert!(at("/servers/ops/mcp", retry).send(&app).await.result().get("content").is_some(), "opens where minted");
}
