//! Durable tasks through the gateway (memory store, in-process workers): the extension's
//! flat shapes and rules in 2026-07-28, core tasks in 2025-11-25, one record read by both.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};
use tokio::sync::Notify;

use mcpgate::catalog::{BoxFuture, Failure, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor};
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::testing::wait::{Look, wait_every};

use crate::support::{Req, app, app_with, assert_error, config, initialize};

const EXT: &str = "io.modelcontextprotocol/tasks";

fn with_ext() -> Value {
    json!({"extensions": {EXT: {}}})
}

async fn create(app: &Router, tool: &str, args: Value) -> Value {
    let resp = Req::modern_with("tools/call", json!({"name": tool, "arguments": args}), with_ext()).send(app).await;
    resp.result()
}

async fn get(app: &Router, id: &str) -> crate::support::Resp {
    Req::modern_with("tasks/get", json!({"taskId": id}), with_ext()).send(app).await
}

/// Polls `tasks/get` (bounded) until the task is terminal.
async fn settle(app: &Router, id: &str) -> Value {
    let what = format!("task {id} to reach a terminal status");
    wait_every(what, Duration::from_secs(10), Duration::from_millis(50), async || {
        let task = get(app, id).await.result();
        if ["completed", "failed", "cancelled"].contains(&task["status"].as_str().unwrap_or_default()) {
            Look::Done(task)
        } else {
            Look::NotYet(task.to_string())
        }
    })
    .await
}

#[tokio::test]
async fn create_result_is_flat_durable_and_renamed() {
    let app = app(config()).await;
    let created = create(&app, "slow_compute", json!({"seconds": 0.2, "label": "x"})).await;
    assert_eq!(created["resultType"], "task");
    assert_eq!(created["status"], "working");
    assert_eq!(created["ttlMs"], 3_600_000);
    assert_eq!(created["pollIntervalMs"], 1000);
    for absent in ["task", "ttl", "pollInterval", "result", "error", "inputRequests", "requestState"] {
        assert!(created.get(absent).is_none(), "{absent} in {created}");
    }
    let id = created["taskId"].as_str().expect("taskId");
    assert!(id.len() >= 26, "at least 128 random bits: {id}");
    assert!(created["createdAt"].as_str().expect("iso").ends_with('Z'));
    let now = get(&app, id).await.result();
    assert_eq!(now["resultType"], "complete");
    assert_eq!(now["taskId"], id);
    let done = settle(&app, id).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["result"]["content"][0]["text"], "Computed x in 0.2 s");
    assert_eq!(done["result"]["resultType"], "complete");
    assert!(done["result"].get("_meta").is_none_or(|m| m.get("io.modelcontextprotocol/related-task").is_none()));
}

#[tokio::test]
async fn tool_errors_complete_and_protocol_errors_fail() {
    let app = app(config()).await;
    let tool_error = create(&app, "failing_job", json!({})).await;
    let done = settle(&app, tool_error["taskId"].as_str().expect("id")).await;
    assert_eq!(done["status"], "completed", "isError is a completed task in the extension");
    assert_eq!(done["result"]["isError"], true);
    let protocol = create(&app, "protocol_error_job", json!({})).await;
    let failed = settle(&app, protocol["taskId"].as_str().expect("id")).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], -32602);
    assert!(failed.get("result").is_none());
}

#[tokio::test]
async fn bad_arguments_are_a_tool_error_answered_before_a_task_exists() {
    let app = app(config()).await;
    // Arguments the tool refuses are answered as its result, with `isError` (SEP-1303): the
    // model reads why. No task is made (2026-07-28 lets the server answer without one).
    let refused = |json: &Value| {
        assert_eq!(json["isError"], true, "{json}");
        assert!(json.get("taskId").is_none() && json.get("task").is_none(), "no task: {json}");
        json["content"][0]["text"].as_str().unwrap_or_default().to_owned()
    };
    let modern =
        Req::modern_with("tools/call", json!({"name": "slow_compute", "arguments": {"seconds": "x"}}), with_ext());
    let json = modern.send(&app).await.result();
    assert_eq!(json["resultType"], "complete", "{json}");
    assert!(refused(&json).contains("invalid arguments"), "{json}");
    let out_of_range =
        Req::modern_with("tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 1e9}}), with_ext());
    assert!(refused(&out_of_range.send(&app).await.result()).contains("seconds"));
    // A 2025-11-25 call without `task` gets the result; one augmented with `task` is owed a
    // CreateTaskResult, so the refusal stays the protocol error its client can read.
    let (session, _) = initialize(&app, "2025-11-25").await;
    let plain = json!({"name": "slow_compute", "arguments": {"seconds": -1}});
    let json = Req::legacy("tools/call", plain, Some(&session)).send(&app).await.result();
    assert!(refused(&json).contains("invalid arguments"), "{json}");
    let augmented = json!({"name": "slow_compute", "arguments": {"seconds": -1}, "task": {}});
    let json = assert_error(&Req::legacy("tools/call", augmented, Some(&session)).send(&app).await, 200, -32602);
    assert!(json["error"]["message"].as_str().unwrap_or_default().contains("invalid arguments"), "{json}");
    // An unknown tool stays a protocol error.
    let unknown = Req::modern_with("tools/call", json!({"name": "nope", "arguments": {}}), with_ext());
    assert_error(&unknown.send(&app).await, 200, -32602);
}

#[tokio::test]
async fn the_extension_gates_tasks() {
    let app = app(config()).await;
    // Without the extension an optional task tool runs synchronously...
    let sync = Req::modern("tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 0}}))
        .send(&app)
        .await
        .result();
    assert_eq!(sync["resultType"], "complete");
    assert!(sync.get("taskId").is_none());
    // ...a required one is refused, and task methods are refused before any lookup.
    let json = assert_error(&Req::modern("tools/call", json!({"name": "failing_job"})).send(&app).await, 400, -32021);
    assert!(json["error"]["data"]["requiredCapabilities"]["extensions"][EXT].is_object(), "{json}");
    for method in ["tasks/get", "tasks/cancel"] {
        assert_error(&Req::modern(method, json!({"taskId": "gate-test"})).send(&app).await, 400, -32021);
    }
    assert_error(
        &Req::modern("tasks/update", json!({"taskId": "gate-test", "inputResponses": {}})).send(&app).await,
        400,
        -32021,
    );
    for method in ["tasks/result", "tasks/list"] {
        assert_error(&Req::modern_with(method, json!({"taskId": "x"}), with_ext()).send(&app).await, 404, -32601);
    }
    // A forbidden tool stays synchronous even with the extension.
    let greet = create(&app, "greet", json!({"name": "sync"})).await;
    assert_eq!(greet["content"][0]["text"], "Hello, sync!");
}

#[tokio::test]
async fn unknown_malformed_and_foreign_ids_are_not_found() {
    let app = app(config()).await;
    for id in ["nope", "t00-AAAAAAAAAAAAAAAAAAAAAA", "t0g-AAAAAAAAAAAAAAAAAAAAAA", ""] {
        let json = assert_error(&get(&app, id).await, 200, -32602);
        assert!(json["error"]["message"].as_str().expect("message").contains("not found"), "{json}");
    }
    let wrong_name = Req::modern_with("tasks/get", json!({"taskId": "t00-AAAAAAAAAAAAAAAAAAAAAA"}), with_ext())
        .header("mcp-name", "t00-BBBBBBBBBBBBBBBBBBBBBB");
    assert_error(&wrong_name.send(&app).await, 400, -32020);
}

#[tokio::test]
async fn cancel_acks_idempotently_and_the_task_stays_cancelled() {
    let app = app(config()).await;
    let created = create(&app, "slow_compute", json!({"seconds": 60})).await;
    let id = created["taskId"].as_str().expect("id");
    for _ in 0..2 {
        let ack = Req::modern_with("tasks/cancel", json!({"taskId": id}), with_ext()).send(&app).await.result();
        assert_eq!(ack, json!({"resultType": "complete", "_meta": ack["_meta"]}), "an empty ack: {ack}");
    }
    let task = settle(&app, id).await;
    assert_eq!(task["status"], "cancelled");
}

#[tokio::test]
async fn retries_of_the_same_call_get_the_same_task() {
    let app = app(config()).await;
    let keyed = |args: Value, key: &'static str| {
        let app = app.clone();
        async move {
            let call = json!({"name": "slow_compute", "arguments": args});
            Req::modern_with("tools/call", call, with_ext()).header("idempotency-key", key).send(&app).await
        }
    };
    let a = keyed(json!({"seconds": 0.1, "label": "same"}), "k1").await.result();
    let b = keyed(json!({"label": "same", "seconds": 0.1}), "k1").await.result();
    assert_eq!(a["taskId"], b["taskId"], "same principal and key, the same arguments in another order");
    let reused = keyed(json!({"seconds": 0.1, "label": "other"}), "k1").await;
    let json = assert_error(&reused, 200, -32602);
    assert!(json["error"]["message"].as_str().expect("message").contains("reused with different arguments"), "{json}");
    // Without a key a 2026-07-28 call always creates a task: request ids identify nothing.
    let c = create(&app, "slow_compute", json!({"seconds": 0.1, "label": "same"})).await;
    let d = create(&app, "slow_compute", json!({"seconds": 0.1, "label": "same"})).await;
    assert_ne!(c["taskId"], d["taskId"]);
    assert_ne!(a["taskId"], c["taskId"]);
}

/// How long a test waits for a tool to start, or to stop once cancelled: liveness, not speed.
const LIVENESS: Duration = Duration::from_secs(20);

/// Signals that its run started, then runs far past [`LIVENESS`] unless cancelled; records
/// that its run ended (cancelled: the future dropped).
struct Sentinel {
    descriptor: ToolDescriptor,
    started: Arc<Notify>,
    cancelled: Arc<AtomicBool>,
}

impl Tool for Sentinel {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            struct Flag(Arc<AtomicBool>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _flag = Flag(self.cancelled.clone());
            self.started.notify_one();
            tokio::time::sleep(Duration::from_secs(600)).await;
            Outcome::Failed(Failure::Internal("not cancelled".to_owned()))
        })
    }
}

#[tokio::test]
async fn cancelling_stops_the_running_tool() {
    let (started, cancelled) = (Arc::new(Notify::new()), Arc::new(AtomicBool::new(false)));
    let (start, flag) = (started.clone(), cancelled.clone());
    let (app, _) = app_with(config(), move |b| {
        b.tool(Sentinel {
            descriptor: ToolDescriptor::new("sentinel", "Runs until cancelled.", json!({"type": "object"}))
                .task_policy(TaskPolicy::Required),
            started: start,
            cancelled: flag,
        });
    })
    .await;
    let id = create(&app, "sentinel", json!({})).await["taskId"].as_str().expect("id").to_owned();
    tokio::time::timeout(LIVENESS, started.notified()).await.expect("the task's tool started within 20 s");
    assert!(!cancelled.load(Ordering::SeqCst), "running");
    Req::modern_with("tasks/cancel", json!({"taskId": id}), with_ext()).send(&app).await.result();
    let every = Duration::from_millis(10);
    wait_every("the tool to stop after the cancel", LIVENESS, every, async || cancelled.load(Ordering::SeqCst)).await;
}

#[tokio::test]
async fn tasks_expire_after_their_lifetime() {
    let mut c = config();
    c.tasks.default_ttl_ms = 1_000;
    c.tasks.max_ttl_ms = 1_000;
    c.tasks.answer_within_ms = 0;
    let app = app(c).await;
    // The store's clock is the wall clock: the lifetime has to pass for real.
    let before = tokio::time::Instant::now();
    let created = create(&app, "slow_compute", json!({"seconds": 0})).await;
    assert_eq!(created["ttlMs"], 1000);
    let id = created["taskId"].as_str().expect("id");
    assert!(get(&app, id).await.result()["status"].is_string());
    // Polls until the task is gone (bounded), then checks it did not go before its lifetime.
    let within = LIVENESS.saturating_sub(before.elapsed());
    let what = format!("task {id} to be gone after its 1 s lifetime");
    let resp = wait_every(what, within, Duration::from_millis(50), async || {
        let resp = get(&app, id).await;
        if resp.json().get("error").is_some() { Look::Done(resp) } else { Look::NotYet(resp.json().to_string()) }
    })
    .await;
    assert_error(&resp, 200, -32602);
    assert!(before.elapsed() >= Duration::from_secs(1), "gone before its 1 s lifetime ended");
}

#[tokio::test]
async fn legacy_core_tasks_share_the_record() {
    let app = app(config()).await;
    let (session, init) = initialize(&app, "2025-11-25").await;
    assert!(init["capabilities"]["tasks"]["requests"]["tools"]["call"].is_object(), "{init}");
    assert!(init["capabilities"]["tasks"]["cancel"].is_object());
    assert!(init["capabilities"]["tasks"].get("list").is_none(), "no tasks/list without authentication");
    let tools = Req::legacy("tools/list", json!({}), Some(&session)).send(&app).await.result();
    let slow =
        tools["tools"].as_array().expect("tools").iter().find(|t| t["name"] == "slow_compute").expect("slow_compute");
    assert_eq!(slow["execution"]["taskSupport"], "optional");

    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0.3}, "task": {"ttl": 120_000}});
    let created = Req::legacy("tools/call", call, Some(&session)).send(&app).await.result();
    let task = &created["task"];
    assert_eq!(task["status"], "working");
    assert_eq!(task["ttl"], 120_000);
    assert!(task.get("ttlMs").is_none() && created.get("resultType").is_none());
    let id = task["taskId"].as_str().expect("id");

    // tasks/result blocks until the task is done, then answers with its result.
    let result = Req::legacy("tasks/result", json!({"taskId": id}), Some(&session))
        .header("accept", "application/json")
        .send(&app)
        .await;
    let result = result.result();
    assert_eq!(result["content"][0]["text"], "Computed result in 0.3 s");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"], id);

    let got = Req::legacy("tasks/get", json!({"taskId": id}), Some(&session)).send(&app).await.result();
    assert_eq!(got["status"], "completed");
    let cancel = Req::legacy("tasks/cancel", json!({"taskId": id}), Some(&session)).send(&app).await;
    assert_error(&cancel, 200, -32602);
    assert_error(&Req::legacy("tasks/list", json!({}), Some(&session)).send(&app).await, 200, -32601);
}

#[tokio::test]
async fn legacy_reads_tool_errors_as_failed() {
    // Anonymous callers share tasks across sessions and eras only when scoped to the server.
    let mut c = config();
    c.tasks.anonymous_scope = mcpgate::config::AnonymousScope::Server;
    let app = app(c).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let created =
        Req::legacy("tools/call", json!({"name": "failing_job", "task": {}}), Some(&session)).send(&app).await.result();
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    let result = Req::legacy("tasks/result", json!({"taskId": id}), Some(&session)).send(&app).await;
    let events = result.sse();
    assert_eq!(events.last().expect("final")["result"]["isError"], true);
    let got = Req::legacy("tasks/get", json!({"taskId": id}), Some(&session)).send(&app).await.result();
    assert_eq!(got["status"], "failed", "2025-11-25 reads isError as failed");
    // The modern reader of the same task sees it completed.
    let modern = get(&app, &id).await.result();
    assert_eq!(modern["status"], "completed");
}

#[tokio::test]
async fn anonymous_tasks_are_scoped_to_their_legacy_session_by_default() {
    let app = app(config()).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let (other, _) = initialize(&app, "2025-11-25").await;
    let created =
        Req::legacy("tools/call", json!({"name": "failing_job", "task": {}}), Some(&session)).send(&app).await.result();
    let id = created["task"]["taskId"].as_str().expect("id").to_owned();
    let own = Req::legacy("tasks/get", json!({"taskId": id}), Some(&session)).send(&app).await.result();
    assert_eq!(own["taskId"], id.as_str());
    // Another anonymous session, and a sessionless modern caller, are other callers.
    for foreign in
        [Req::legacy("tasks/get", json!({"taskId": id}), Some(&other)).send(&app).await, get(&app, &id).await]
    {
        let json = foreign.json();
        assert!(json["error"]["message"].as_str().expect("an error").contains("not found"), "{json}");
    }
}

#[tokio::test]
async fn legacy_task_rules() {
    let mut c = config();
    c.tasks.max_ttl_ms = 5_000;
    let app = app(c).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let resp =
        Req::legacy("tools/call", json!({"name": "greet", "arguments": {"name": "x"}, "task": {}}), Some(&session))
            .send(&app)
            .await;
    assert_error(&resp, 200, -32601);
    assert_error(
        &Req::legacy("tools/call", json!({"name": "failing_job"}), Some(&session)).send(&app).await,
        200,
        -32601,
    );
    let long = json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": 999_999_999}});
    let created = Req::legacy("tools/call", long, Some(&session)).send(&app).await.result();
    assert_eq!(created["task"]["ttl"], 5_000, "clamped to tasks.max_ttl_ms");
    let unlimited = json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {"ttl": null}});
    let created = Req::legacy("tools/call", unlimited, Some(&session)).send(&app).await.result();
    assert_eq!(created["task"]["ttl"], 5_000, "unlimited only when allowed");
    let (older, _) = initialize(&app, "2025-06-18").await;
    let plain = Req::legacy(
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}}),
        Some(&older),
    )
    .header("mcp-protocol-version", "2025-06-18")
    .send(&app)
    .await
    .result();
    assert!(plain["content"].is_array(), "older versions have no tasks: the call runs synchronously");
}

// The keep-alives and the tool's 2.5 s run are on tokio's clock: paused, they pass without
// waiting (the task's records, on the store's wall clock, need no time to pass).
#[tokio::test(start_paused = true)]
async fn waiting_on_tasks_result_streams_keep_alives() {
    let mut c = config();
    c.http.sse_keepalive_secs = 1;
    let app = app(c).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 2.5}, "task": {}});
    let id = Req::legacy("tools/call", call, Some(&session)).send(&app).await.result()["task"]["taskId"]
        .as_str()
        .expect("id")
        .to_owned();
    let resp = Req::legacy("tasks/result", json!({"taskId": id}), Some(&session)).send(&app).await;
    let body = String::from_utf8_lossy(&resp.body);
    assert!(body.contains(": keep-alive"), "{body}");
    assert_eq!(resp.sse().last().expect("final")["result"]["content"][0]["text"], "Computed result in 2.5 s");
}
