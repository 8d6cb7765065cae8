//! Task admission: every way a task comes to be is charged to its caller's task quotas and
//! task rate limit and, when it runs here at once, takes one of the replica's worker slots, or
//! is refused as documented. Here the two ways a call becomes a task while it runs: a
//! 2025-11-25 call whose tool asks for input (refused with 429 or 503 when it cannot become
//! one), and an `auto` call that runs long (it stays synchronous when it cannot).

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate::catalog::{BoxFuture, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor};
use mcpgate::protocol::content::ContentBlock;
use mcpgate::protocol::tool::CallToolResult;
use mcpgate_store::testing::wait::{Look, wait_every};

use crate::support::{Req, Resp, SseStream, app, app_with, assert_error, config, initialize};

const EXT: &str = "io.modelcontextprotocol/tasks";

/// A 2025-11-25 plain call of `confirm_delete` (it asks for a confirmation) in a new session:
/// its stream once it asked, or the response that refused it.
async fn asking_call(app: &axum::Router, file: &str) -> Result<SseStream, Resp> {
    let (session, _) = initialize(app, "2025-11-25").await;
    let call = json!({"name": "confirm_delete", "arguments": {"filename": file}});
    let mut stream = SseStream::open_or_reply(app, Req::legacy("tools/call", call, Some(&session))).await?;
    let asked = stream.next().await.expect("the call asks before anything else");
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    Ok(stream)
}

#[tokio::test]
async fn a_legacy_call_that_asks_for_input_is_charged_to_the_callers_task_quota() {
    let mut c = config();
    c.limits.max_running_tasks = 1;
    let app = app(c).await;
    let first = asking_call(&app, "one.log").await.expect("the first call became a task");
    // Its task is the caller's one running task: the next call that would become one is
    // refused before it does, as a task creation over the quota is.
    let refused = asking_call(&app, "two.log").await.err().expect("a second one is over the quota");
    let json = assert_error(&refused, 429, -32600);
    assert_eq!((&json["error"]["data"]["quota"], &json["error"]["data"]["max"]), (&json!("running tasks"), &json!(1)));
    // Only the end of a running task frees a place: no time to retry after is promised.
    assert!(refused.header("retry-after").is_none(), "{json}");
    let (session, _) = initialize(&app, "2025-11-25").await;
    let task = json!({"name": "confirm_delete", "arguments": {"filename": "three.log"}, "task": {}});
    assert_error(&Req::legacy("tools/call", task, Some(&session)).send(&app).await, 429, -32600);

    // The client leaving cancels the task, which frees its place.
    drop(first);
    let what = "the cancelled task to count no more (a new one admitted)";
    wait_every(what, Duration::from_secs(5), Duration::from_millis(50), async || {
        match asking_call(&app, "four.log").await {
            Ok(_) => Look::Done(()),
            Err(refused) => Look::NotYet(assert_error(&refused, 429, -32600).to_string()),
        }
    })
    .await;
}

#[tokio::test]
async fn a_legacy_call_that_asks_for_input_is_charged_to_the_task_rate_limit() {
    let mut c = config();
    c.limits.tasks_per_minute = 1;
    c.limits.tasks_burst = 1;
    let app = app(c).await;
    let _first = asking_call(&app, "one.log").await.expect("the first call became a task");
    let refused = asking_call(&app, "two.log").await.err().expect("a second task this minute is over the limit");
    let json = assert_error(&refused, 429, -32600);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("task creations per caller"), "{message}");
    assert!(refused.header("retry-after").is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1)));
}

#[tokio::test]
async fn a_legacy_call_that_asks_for_input_needs_a_free_worker() {
    let mut c = config();
    c.tasks.max_running = 2;
    let (app, state) = app_with(c, |_| {}).await;
    let mut held = Vec::new();
    let mut refused = 0;
    for i in 0..4 {
        match asking_call(&app, &format!("{i}.log")).await {
            Ok(stream) => held.push(stream),
            Err(resp) => {
                let json = assert_error(&resp, 503, -32603);
                assert_eq!(resp.header("retry-after"), Some("1"), "{json}");
                let message = json["error"]["message"].as_str().unwrap_or_default();
                assert!(message.contains("worker"), "{message}");
                refused += 1;
            }
        }
    }
    // Each waiting call holds a worker slot: never more than the replica has.
    assert!(held.len() <= 2 && refused >= 2, "{} calls became tasks on two workers", held.len());
    assert!(state.workers().running() <= 2, "{} runs on two workers", state.workers().running());
}

/// Runs 400 ms, then answers; becomes a task after 50 ms when it can.
struct Slow {
    descriptor: ToolDescriptor,
}

impl Tool for Slow {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            tokio::time::sleep(Duration::from_millis(400)).await;
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("done")]))
        })
    }
}

fn slow_call() -> Req {
    Req::modern_with("tools/call", json!({"name": "slow_auto", "arguments": {}}), json!({"extensions": {EXT: {}}}))
}

#[tokio::test]
async fn a_long_call_over_the_task_quota_stays_synchronous() {
    let mut c = config();
    c.limits.max_running_tasks = 1;
    let (app, _) = app_with(c, |b| {
        let descriptor = ToolDescriptor::new("slow_auto", "Slow.", json!({"type": "object"}))
            .task_policy(TaskPolicy::Auto { after: Duration::from_millis(50) });
        b.tool(Slow { descriptor });
    })
    .await;
    // With room in the quota, the long call becomes a task.
    let promoted = slow_call().send(&app).await.result();
    assert_eq!(promoted["resultType"], "task", "{promoted}");
    let id = promoted["taskId"].as_str().expect("a task id").to_owned();
    wait_every(format_args!("task {id} to complete"), Duration::from_secs(5), Duration::from_millis(30), async || {
        let got = Req::modern_with("tasks/get", json!({"taskId": id}), json!({"extensions": {EXT: {}}}))
            .send(&app)
            .await
            .result();
        if got["status"] == "completed" { Look::Done(()) } else { Look::NotYet(got.to_string()) }
    })
    .await;
    // With the quota taken by a running task, it is not made a task: it answers in the request.
    let report = json!({"name": "slow_report", "arguments": {"topic": "q", "seconds": 60}});
    let running = Req::modern_with("tools/call", report, json!({"extensions": {EXT: {}}})).send(&app).await.result();
    assert_eq!(running["resultType"], "task", "{running}");
    let answered: Value = slow_call().send(&app).await.result();
    assert_eq!(answered["content"][0]["text"], "done", "{answered}");
    assert!(answered.get("taskId").is_none(), "{answered}");
}
