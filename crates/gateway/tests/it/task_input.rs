//! Tasks that need input (memory store, in-process workers): `tasks/update` in 2026-07-28,
//! input requests on the legacy `tasks/result` stream answered by a POSTed response, and a
//! call that finishes its input rounds before it becomes a task.

use std::time::Duration;

use axum::Router;
use mcpgate_store::testing::wait::{self, Look};
use serde_json::{Value, json};

use crate::support::{
    Req, SseStream, app, assert_error, assert_error_without_id, claims, config, hs, hs256_config, initialize,
};

const EXT: &str = "io.modelcontextprotocol/tasks";

fn caps() -> Value {
    json!({"elicitation": {}, "extensions": {EXT: {}}})
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

async fn create(app: &Router, tool: &str, args: Value) -> String {
    let created =
        Req::modern_with("tools/call", json!({"name": tool, "arguments": args}), caps()).send(app).await.result();
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().expect("id").to_owned()
}

async fn get(app: &Router, id: &str) -> Value {
    Req::modern_with("tasks/get", json!({"taskId": id}), caps()).send(app).await.result()
}

async fn update(app: &Router, id: &str, answers: Value) -> crate::support::Resp {
    Req::modern_with("tasks/update", json!({"taskId": id, "inputResponses": answers}), caps()).send(app).await
}

/// Polls `tasks/get` (bounded) until the task has `status`.
async fn wait_for(app: &Router, id: &str, status: &str) -> Value {
    wait::wait_every(
        format_args!("task {id} to be {status}"),
        Duration::from_secs(10),
        Duration::from_millis(30),
        async || {
            let task = get(app, id).await;
            if task["status"] == status { Look::Done(task) } else { Look::NotYet(task.to_string()) }
        },
    )
    .await
}

#[tokio::test]
async fn answers_resume_a_parked_task() {
    let app = app(config()).await;
    let id = create(&app, "confirm_delete", json!({"filename": "report.pdf"})).await;
    let parked = wait_for(&app, &id, "input_required").await;
    assert_eq!(parked["inputRequests"]["confirm"]["method"], "elicitation/create", "{parked}");
    assert!(parked.get("requestState").is_none());

    // The wrong kind of answer is refused and changes nothing.
    assert_error(&update(&app, &id, json!({"confirm": {"roots": []}})).await, 200, -32602);
    // Keys that are not outstanding are acknowledged and ignored.
    let ack = update(&app, &id, json!({"unknown-key": {"ignored": true}})).await.result();
    assert_eq!(ack["resultType"], "complete");
    assert!(ack.get("taskId").is_none() && ack.get("status").is_none(), "an empty ack: {ack}");
    assert_eq!(get(&app, &id).await["status"], "input_required");

    assert_eq!(
        update(&app, &id, json!({"confirm": accept(json!({"confirm": true}))})).await.result()["resultType"],
        "complete"
    );
    let done = wait_for(&app, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Deleted report.pdf");
    assert!(done.get("inputRequests").is_none(), "{done}");
}

#[tokio::test]
async fn a_partial_answer_leaves_the_rest_outstanding() {
    let app = app(config()).await;
    let id = create(&app, "multi_input", json!({})).await;
    let parked = wait_for(&app, &id, "input_required").await;
    let keys: Vec<&String> = parked["inputRequests"].as_object().expect("requests").keys().collect();
    assert_eq!(keys, ["confirm", "name"]);
    update(&app, &id, json!({"name": accept(json!({"name": "Ada"}))})).await.result();
    let partial = get(&app, &id).await;
    assert_eq!(partial["status"], "input_required");
    assert!(
        partial["inputRequests"].get("name").is_none() && partial["inputRequests"]["confirm"].is_object(),
        "{partial}"
    );
    update(&app, &id, json!({"confirm": accept(json!({"confirm": true}))})).await.result();
    let done = wait_for(&app, &id, "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Thanks, Ada: done", "answers of both rounds reach the tool");
}

#[tokio::test]
async fn a_call_finishes_its_input_rounds_before_it_becomes_a_task() {
    let app = app(config()).await;
    // Answers nobody asked for (no requestState) never reach a task.
    let unprompted =
        json!({"name": "test_tool_with_task", "inputResponses": {"user_name": accept(json!({"name": "Mallory"}))}});
    let asked = Req::modern_with("tools/call", unprompted, caps()).send(&app).await.result();
    assert_eq!(asked["resultType"], "input_required", "{asked}");
    let r1 = Req::modern_with("tools/call", json!({"name": "test_tool_with_task"}), caps()).send(&app).await.result();
    assert_eq!(r1["resultType"], "input_required", "{r1}");
    assert!(r1.get("taskId").is_none());
    let state = r1["requestState"].as_str().expect("state").to_owned();
    let r2 = Req::modern_with(
        "tools/call",
        json!({"name": "test_tool_with_task", "inputResponses": {"user_name": accept(json!({"name": "Alice"}))}, "requestState": state}),
        caps(),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(r2["resultType"], "task", "{r2}");
    assert!(r2.get("requestState").is_none() && r2.get("inputRequests").is_none(), "{r2}");
    let done = wait_for(&app, r2["taskId"].as_str().expect("id"), "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "Hello, Alice! (from a task)");
}

/// A legacy JSON-RPC response POSTed by the session's client.
fn response(session: &str, id: &Value, result: Value) -> Req {
    let body = json!({"jsonrpc": "2.0", "id": id, "result": result});
    Req::post(body.to_string()).header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25")
}

#[tokio::test]
async fn legacy_tasks_result_carries_the_requests_and_routes_the_answers() {
    let app = app(config()).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let call = json!({"name": "confirm_delete", "arguments": {"filename": "old.log"}, "task": {}});
    let id = Req::legacy("tools/call", call, Some(&session)).send(&app).await.result()["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut stream = SseStream::open(&app, Req::legacy("tasks/result", json!({"taskId": id}), Some(&session))).await;
    let request = stream.next().await.expect("an input request on the stream");
    assert_eq!(request["method"], "elicitation/create", "{request}");
    assert_eq!(request["params"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    assert!(request["params"]["requestedSchema"].is_object(), "{request}");
    let request_id = request["id"].clone();
    assert!(request_id.as_str().is_some_and(|s| s.len() > 40), "an opaque sealed id: {request_id}");

    // A forged or foreign id is refused with an HTTP error and nothing recorded.
    let forged =
        response(&session, &json!("mcpgate-input:v1.k1.AAAA"), accept(json!({"confirm": true}))).send(&app).await;
    // A POSTed response answers no request of the client's: the error carries no id.
    assert_error_without_id(&forged, 400, -32600);
    // A response to something else entirely is just acknowledged.
    assert_eq!(response(&session, &json!(99), json!({})).send(&app).await.status.as_u16(), 202);

    let answered = response(&session, &request_id, accept(json!({"confirm": true}))).send(&app).await;
    assert_eq!(answered.status.as_u16(), 202, "{:?}", String::from_utf8_lossy(&answered.body));
    let last = loop {
        let message = stream.next().await.expect("the stream ends with the result");
        if message.get("result").is_some() || message.get("error").is_some() {
            break message;
        }
    };
    assert_eq!(last["result"]["content"][0]["text"], "Deleted old.log", "{last}");
    assert_eq!(last["result"]["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id.as_str());
    assert!(stream.next().await.is_none(), "the stream ends after the result");
}

#[tokio::test]
async fn another_principal_cannot_answer_a_tasks_input_request() {
    let app = app(hs256_config()).await;
    let bearer = |sub: &str| format!("Bearer {}", hs(&claims(sub)));
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "l", "version": "1"}});
    let alice =
        Req::legacy("initialize", init.clone(), None).header("authorization", &bearer("alice")).send(&app).await;
    let session = alice.header("mcp-session-id").expect("session").to_owned();
    let call = json!({"name": "confirm_delete", "arguments": {"filename": "x"}, "task": {}});
    let id = Req::legacy("tools/call", call, Some(&session))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await
        .result()["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    let mut stream = SseStream::open(
        &app,
        Req::legacy("tasks/result", json!({"taskId": id}), Some(&session)).header("authorization", &bearer("alice")),
    )
    .await;
    let request = stream.next().await.expect("an input request");
    let bob = Req::legacy("initialize", init, None).header("authorization", &bearer("bob")).send(&app).await;
    let bob_session = bob.header("mcp-session-id").expect("session").to_owned();
    let stolen = response(&bob_session, &request["id"], accept(json!({"confirm": true})))
        .header("authorization", &bearer("bob"));
    assert_error_without_id(&stolen.send(&app).await, 400, -32600);
    drop(stream);
    let mut still =
        Req::legacy("tasks/get", json!({"taskId": id}), Some(&session)).header("authorization", &bearer("alice"));
    still = still.header("mcp-protocol-version", "2025-11-25");
    assert_eq!(still.send(&app).await.result()["status"], "input_required", "bob's answer was not recorded");
}

#[tokio::test]
async fn a_json_only_legacy_wait_on_a_parked_task_says_why_it_cannot_go_on() {
    let app = app(config()).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let call = json!({"name": "confirm_delete", "arguments": {"filename": "y"}, "task": {}});
    let id = Req::legacy("tools/call", call, Some(&session)).send(&app).await.result()["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    wait::wait_every(
        format_args!("task {id} to park"),
        Duration::from_secs(5),
        Duration::from_millis(30),
        async || {
            let task = Req::legacy("tasks/get", json!({"taskId": id}), Some(&session)).send(&app).await.result();
            if task["status"] == "input_required" { Look::Done(()) } else { Look::NotYet(task.to_string()) }
        },
    )
    .await;
    let resp = Req::legacy("tasks/result", json!({"taskId": id}), Some(&session))
        .header("accept", "application/json")
        .send(&app)
        .await;
    let json = assert_error(&resp, 200, -32603);
    assert!(json["error"]["message"].as_str().unwrap_or_default().contains("text/event-stream"), "{json}");
}

#[tokio::test]
async fn an_answer_over_max_answer_bytes_is_refused_and_nothing_recorded() {
    let mut c = config();
    c.tasks.max_answer_bytes = 1024;
    let app = app(c).await;
    let id = create(&app, "confirm_delete", json!({"filename": "big.log"})).await;
    wait_for(&app, &id, "input_required").await;
    let big = accept(json!({"confirm": true, "note": "x".repeat(2000)}));
    let json = assert_error(&update(&app, &id, json!({"confirm": big})).await, 200, -32602);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("larger than 1024 bytes"), "{message}");
    assert_eq!(get(&app, &id).await["status"], "input_required", "the oversized answer was not recorded");
    // An answer within the bound is taken.
    update(&app, &id, json!({"confirm": accept(json!({"confirm": true}))})).await.result();
    wait_for(&app, &id, "completed").await;
}
