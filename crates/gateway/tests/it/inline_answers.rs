//! Inline answers (`tasks.answer_within_ms`), on the memory store and a real `redis-server`: a
//! 2026-07-28 call whose task completes within the window is answered with its result and its
//! task's id (one that fails, with the failed task), and the task stays stored (listed, found
//! again by an idempotent retry); a task slower than the
//! window, a window of 0 and a 2025-11-25 call get the task; a task that asks for input gets
//! the task at once; a request cancelled during the window leaves its task to complete; and a
//! 2025-11-25 `tasks/result` of a running task waits for it, woken by its event.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};
use tokio::sync::{Notify, Semaphore};

use mcpgate::catalog::{BoxFuture, Failure, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor};
use mcpgate::config::Secret;
use mcpgate::{AppState, Config};
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_every, wait_for};

use crate::support::{Req, app_with, claims, hs, hs256_config};

/// How long a test waits for something that should happen at once: liveness, not speed.
const LIVENESS: Duration = Duration::from_secs(20);

/// An answer window no task of these tests outlasts unless held (a gated one): "ends within
/// the window" then holds however loaded the machine, and the call is answered when the task
/// ends, not when the window does. Longer than a configuration may set (250 ms), which bounds
/// how long a real call is held, not what the window means.
const WIDE_WINDOW_MS: u64 = 20_000;

#[derive(Debug, Clone, Copy)]
enum Store {
    Memory,
    Redis,
}

/// A JWT-authenticated gateway (so legacy `tasks/list` shows what the store holds) with the
/// answer window `window_ms`, on `store`; the Redis server lives as long as the returned one.
fn config(store: Store, window_ms: u64) -> (Config, Option<RedisServer>) {
    let mut c = hs256_config();
    c.tasks.answer_within_ms = window_ms;
    let server = match store {
        Store::Memory => None,
        Store::Redis => {
            let server = RedisServer::start();
            c.redis_url = Some(server.url());
            c.seal.keys = vec![Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
            c.store.prefix = "inline".to_owned();
            Some(server)
        }
    };
    (c, server)
}

fn alice() -> String {
    format!("Bearer {}", hs(&claims("alice")))
}

fn with_ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

fn call(tool: &str, args: Value) -> Req {
    Req::modern_with("tools/call", json!({"name": tool, "arguments": args}), with_ext())
        .header("authorization", &alice())
}

/// A 2025-11-25 session of Alice's.
async fn session(app: &Router) -> String {
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}});
    let init = Req::legacy("initialize", params, None).header("authorization", &alice()).send(app).await;
    init.header("mcp-session-id").expect("a session").to_owned()
}

/// Alice's tasks as the store holds them (legacy `tasks/list`, in a session of hers).
async fn listed(app: &Router) -> Vec<Value> {
    let session = session(app).await;
    let list = Req::legacy("tasks/list", json!({}), Some(&session)).header("authorization", &alice()).send(app).await;
    list.result()["tasks"].as_array().expect("tasks").clone()
}

/// Waits (bounded) until Alice holds exactly one task with `status`; returns it.
async fn one_task(app: &Router, status: &str) -> Value {
    wait_for(format_args!("a single {status} task"), LIVENESS, async || {
        let tasks = listed(app).await;
        if tasks.len() == 1 && tasks[0]["status"] == status {
            Look::Done(tasks[0].clone())
        } else {
            Look::not_yet(tasks)
        }
    })
    .await
}

async fn metric(app: &Router, series: &str) -> u64 {
    let text = String::from_utf8_lossy(&Req::get("/metrics").send(app).await.body).into_owned();
    text.lines().find_map(|l| l.strip_prefix(series)?.trim().parse().ok()).unwrap_or(0)
}

/// Fails at once with a protocol error (-32602).
struct Refuses(ToolDescriptor);

impl Tool for Refuses {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.0
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async { Outcome::Failed(Failure::InvalidParams("the job could not read its input".to_owned())) })
    }
}

/// Says it started, then completes once the test lets it through.
struct Gated {
    descriptor: ToolDescriptor,
    started: Arc<Notify>,
    gate: Arc<Semaphore>,
}

impl Tool for Gated {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            self.started.notify_one();
            let _pass = self.gate.acquire().await;
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("let through")]))
        })
    }
}

async fn gateway(store: Store, window_ms: u64) -> (Router, Option<RedisServer>, Arc<Notify>, Arc<Semaphore>) {
    let (app, server, started, gate, _) = gateway_with(store, window_ms, |_| {}).await;
    (app, server, started, gate)
}

/// [`gateway`] with `tune` applied to its configuration; its state too.
async fn gateway_with(
    store: Store,
    window_ms: u64,
    tune: impl FnOnce(&mut Config),
) -> (Router, Option<RedisServer>, Arc<Notify>, Arc<Semaphore>, AppState) {
    let (mut c, server) = config(store, window_ms);
    tune(&mut c);
    let (started, gate) = (Arc::new(Notify::new()), Arc::new(Semaphore::new(0)));
    let (s, g) = (started.clone(), gate.clone());
    let (app, state) = app_with(c, move |b| {
        let task = |name: &str| ToolDescriptor::new(name, "A test task.", json!({"type": "object"}));
        b.tool(Refuses(task("refuses").task_policy(TaskPolicy::Required)));
        b.tool(Gated { descriptor: task("gated").task_policy(TaskPolicy::Required), started: s, gate: g });
    })
    .await;
    (app, server, started, gate, state)
}

async fn ends_at_once_with_its_result(store: Store) {
    let (app, _server, ..) = gateway(store, WIDE_WINDOW_MS).await;
    let key = "inline-1";
    let answer = call("slow_compute", json!({"seconds": 0, "label": "now"})).header("idempotency-key", key).send(&app);
    let result = answer.await.result();
    assert_eq!(result["resultType"], "complete", "{result}");
    assert_eq!(result["content"][0]["text"], "Computed now in 0 s", "{result}");
    assert!(result.get("taskId").is_none(), "{result}");
    let linked = result["_meta"]["io.mcpgate/taskId"].clone();
    assert_eq!(metric(&app, "mcpgate_tasks_total{tool=\"slow_compute\",event=\"answered_inline\"}").await, 1);
    // The task stays: stored completed, and an idempotent retry finds it (answered as a task).
    let task = one_task(&app, "completed").await;
    let retried = call("slow_compute", json!({"seconds": 0, "label": "now"})).header("idempotency-key", key);
    let retried = retried.send(&app).await.result();
    assert_eq!(retried["resultType"], "task", "{retried}");
    assert_eq!(retried["taskId"], task["taskId"], "{retried}");
    assert_eq!(linked, task["taskId"], "the inline answer names its task in _meta");
    let id = task["taskId"].as_str().expect("id");
    let got = Req::modern_with("tasks/get", json!({"taskId": id}), with_ext()).header("authorization", &alice());
    let got = got.send(&app).await.result();
    assert_eq!(got["status"], "completed", "{got}");
    assert_eq!(got["result"]["content"][0]["text"], "Computed now in 0 s", "{got}");
}

#[tokio::test]
async fn a_task_that_ends_at_once_answers_with_its_result_and_stays_stored() {
    ends_at_once_with_its_result(Store::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_ends_at_once_answers_with_its_result_and_stays_stored_on_redis() {
    ends_at_once_with_its_result(Store::Redis).await;
}

/// A protocol error from inside a run is the task's, read with `tasks/get`: answered as the
/// call's own error it would read as a call refused before anything ran.
async fn fails_at_once_as_a_failed_task(store: Store) {
    let (app, _server, ..) = gateway(store, WIDE_WINDOW_MS).await;
    let created = call("refuses", json!({})).send(&app).await.result();
    assert_eq!((&created["resultType"], &created["status"]), (&json!("task"), &json!("failed")), "{created}");
    let id = created["taskId"].as_str().expect("a task id");
    let got = Req::modern_with("tasks/get", json!({"taskId": id}), with_ext()).header("authorization", &alice());
    let got = got.send(&app).await.result();
    assert_eq!((&got["status"], &got["error"]["code"]), (&json!("failed"), &json!(-32602)), "{got}");
    assert!(got["error"]["message"].as_str().expect("message").contains("could not read its input"), "{got}");
    assert_eq!(metric(&app, "mcpgate_tasks_total{tool=\"refuses\",event=\"answered_inline\"}").await, 0);
}

#[tokio::test]
async fn a_protocol_error_within_the_window_answers_with_the_failed_task() {
    fails_at_once_as_a_failed_task(Store::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_protocol_error_within_the_window_answers_with_the_failed_task_on_redis() {
    fails_at_once_as_a_failed_task(Store::Redis).await;
}

async fn cancelled_during_the_window(store: Store) {
    let (app, _server, started, gate) = gateway(store, WIDE_WINDOW_MS).await;
    let request = tokio::spawn({
        let app = app.clone();
        async move { call("gated", json!({})).send(&app).await }
    });
    tokio::time::timeout(LIVENESS, started.notified()).await.expect("the task's tool started");
    // The client goes away while the call waits within its window (the gated task cannot end
    // and the window is wide: still waiting however late `started` came).
    assert!(!request.is_finished(), "the call was answered before its task ended or its window passed");
    request.abort();
    assert!(request.await.expect_err("aborted").is_cancelled());
    gate.add_permits(1);
    one_task(&app, "completed").await;
    assert_eq!(metric(&app, "mcpgate_tasks_total{tool=\"gated\",event=\"answered_inline\"}").await, 0);
}

#[tokio::test]
async fn a_request_cancelled_during_the_window_leaves_its_task_to_complete() {
    cancelled_during_the_window(Store::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_cancelled_during_the_window_leaves_its_task_to_complete_on_redis() {
    cancelled_during_the_window(Store::Redis).await;
}

#[tokio::test]
async fn a_task_slower_than_the_window_answers_with_the_task() {
    let (app, _server, started, gate) = gateway(Store::Memory, 50).await;
    let created = call("gated", json!({})).send(&app).await.result();
    assert_eq!(created["resultType"], "task", "{created}");
    assert_eq!(created["status"], "working", "{created}");
    tokio::time::timeout(LIVENESS, started.notified()).await.expect("the task's tool started");
    gate.add_permits(1);
    one_task(&app, "completed").await;
}

#[tokio::test]
async fn a_window_of_zero_and_a_legacy_call_always_get_the_task() {
    let (app, ..) = gateway(Store::Memory, 0).await;
    let created = call("slow_compute", json!({"seconds": 0})).send(&app).await.result();
    assert_eq!(created["resultType"], "task", "{created}");

    let (app, ..) = gateway(Store::Memory, 1_000).await;
    let session = session(&app).await;
    let legacy = json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}});
    let legacy = Req::legacy("tools/call", legacy, Some(&session)).header("authorization", &alice());
    let created = legacy.send(&app).await.result();
    assert!(created["task"]["taskId"].is_string(), "the client asked for a task: {created}");
}

#[tokio::test]
async fn a_task_asking_for_input_answers_with_the_task_at_once() {
    let (app, ..) = gateway(Store::Memory, 1_000).await;
    let caps = json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}});
    let params = json!({"name": "confirm_delete", "arguments": {"filename": "a.txt"}});
    let request = Req::modern_with("tools/call", params, caps).header("authorization", &alice());
    let created = request.send(&app).await.result();
    assert_eq!(created["resultType"], "task", "{created}");
    // Told by the run that it parked (not the window passing, which would still say working).
    assert_eq!(created["status"], "input_required", "{created}");
}

async fn legacy_result_waits(store: Store) {
    // One waiter slot on the replica: while the tasks/result holds it, a probe is refused.
    let (app, _server, started, gate, state) = gateway_with(store, 250, |c| c.tasks.max_result_waiters = 1).await;
    let session = session(&app).await;
    let legacy = |method: &str, params: Value| {
        Req::legacy(method, params, Some(&session))
            .header("authorization", &alice())
            .header("accept", "application/json")
    };
    let created = legacy("tools/call", json!({"name": "gated", "arguments": {}, "task": {}})).send(&app).await.result();
    let id = created["task"]["taskId"].as_str().expect("a task").to_owned();
    tokio::time::timeout(LIVENESS, started.notified()).await.expect("the task's tool started");
    let waiting = tokio::spawn({
        let (app, request) = (app.clone(), legacy("tasks/result", json!({"taskId": id})));
        async move { request.send(&app).await }
    });
    // The request is seen waiting (it holds the replica's waiter slot) before the gate opens:
    // until then the task cannot end, so a tasks/result that did not wait could not answer
    // its result.
    wait_every("tasks/result to hold the waiter slot", LIVENESS, Duration::from_millis(10), async || {
        let held = state.result_waiters_held() > 0;
        assert!(held || !waiting.is_finished(), "tasks/result answered before its task ended");
        held
    })
    .await;
    assert!(!waiting.is_finished(), "tasks/result answered before its task ended");
    gate.add_permits(1);
    let result = tokio::time::timeout(LIVENESS, waiting).await.expect("answered once the task ended").expect("ran");
    assert_eq!(result.result()["content"][0]["text"], "let through");
}

#[tokio::test]
async fn a_legacy_tasks_result_waits_for_its_running_task() {
    legacy_result_waits(Store::Memory).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_tasks_result_waits_for_its_running_task_on_redis() {
    legacy_result_waits(Store::Redis).await;
}
