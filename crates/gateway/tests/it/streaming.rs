//! SSE: progress notifications before the result on the request's own stream, logs only on
//! opt-in, and closing the stream cancels the work.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use mcpgate::catalog::{BoxFuture, Failure, Outcome, Tool, ToolCall, ToolContext, ToolDescriptor};
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::testing::wait::{Look, wait_every};

use crate::support::{Req, app, app_with, config};

#[tokio::test]
async fn progress_streams_before_the_result() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "test_tool_with_progress", "_meta": {"progressToken": "p-1"}}))
        .send(&app)
        .await;
    assert_eq!(resp.header("x-accel-buffering"), Some("no"));
    let events = resp.sse();
    assert_eq!(events.len(), 4, "{events:?}");
    let progress: Vec<f64> = events[..3]
        .iter()
        .map(|e| {
            assert_eq!(e["method"], "notifications/progress");
            assert_eq!(e["params"]["progressToken"], "p-1");
            e["params"]["progress"].as_f64().expect("number")
        })
        .collect();
    assert_eq!(progress, [0.0, 50.0, 100.0]);
    assert_eq!(events[3]["id"], 1);
    assert_eq!(events[3]["result"]["resultType"], "complete");
}

#[tokio::test]
async fn without_sse_in_accept_progress_is_skipped_and_json_returned() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "test_tool_with_progress", "_meta": {"progressToken": 5}}))
        .header("accept", "application/json")
        .send(&app)
        .await;
    assert_eq!(resp.header("content-type"), Some("application/json"));
    assert_eq!(resp.result()["content"][0]["text"], "Progress test completed");
}

#[tokio::test]
async fn logs_only_when_a_level_is_requested() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "test_logging_tool"})).send(&app).await;
    assert_eq!(resp.header("content-type"), Some("application/json"), "no opt-in, no stream");
    let resp = Req::modern(
        "tools/call",
        json!({"name": "test_logging_tool", "_meta": {"io.modelcontextprotocol/logLevel": "info"}}),
    )
    .send(&app)
    .await;
    let events = resp.sse();
    let logs: Vec<&Value> = events.iter().filter(|e| e["method"] == "notifications/message").collect();
    assert_eq!(logs.len(), 3, "{events:?}");
    assert_eq!(logs[0]["params"]["level"], "info");
    let resp = Req::modern(
        "tools/call",
        json!({"name": "test_logging_tool", "_meta": {"io.modelcontextprotocol/logLevel": "error"}}),
    )
    .send(&app)
    .await;
    assert!(resp.sse().iter().all(|e| e["method"] != "notifications/message"), "info logs are below error");
}

#[tokio::test]
async fn a_streamed_refusal_arrives_as_the_final_event() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "echo", "arguments": {}, "_meta": {"progressToken": 1}}))
        .send(&app)
        .await;
    let events = resp.sse();
    let last = events.last().expect("a final event");
    assert_eq!(last["id"], 1);
    // Arguments the tool refuses are its result with isError (SEP-1303).
    assert_eq!(last["result"]["isError"], true, "{last}");
}

/// How long [`WaitsForCancel`] runs when nothing cancels it: far past every bound the tests
/// wait, so only a cancellation (or a dropped future) can end it within them.
const UNCANCELLED_RUN: Duration = Duration::from_secs(600);
/// How long a test waits for the tool to stop once it is cancelled: liveness, not speed.
const STOP_BOUND: Duration = Duration::from_secs(20);

/// Reports that it started (a progress notification), waits until cancelled, then records
/// that it stopped.
struct WaitsForCancel {
    descriptor: ToolDescriptor,
    cancelled: Arc<AtomicBool>,
}

impl Tool for WaitsForCancel {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            cx.progress(1.0, None, Some("started")).await;
            // Set the flag from a guard: dropping the future is a cancellation too.
            struct Flag(Arc<AtomicBool>);
            impl Drop for Flag {
                fn drop(&mut self) {
                    self.0.store(true, Ordering::SeqCst);
                }
            }
            let _flag = Flag(self.cancelled.clone());
            tokio::select! {
                () = cx.cancelled() => Outcome::Failed(Failure::Internal("cancelled".to_owned())),
                () = tokio::time::sleep(UNCANCELLED_RUN) => {
                    Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("not cancelled")]))
                }
            }
        })
    }
}

#[tokio::test]
async fn closing_the_stream_cancels_the_work() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let flag = cancelled.clone();
    let (app, _) = app_with(config(), move |b| {
        b.tool(WaitsForCancel {
            descriptor: ToolDescriptor::new("waits", "Waits to be cancelled.", json!({"type": "object"})),
            cancelled: flag,
        });
    })
    .await;
    let req = Req::modern("tools/call", json!({"name": "waits", "_meta": {"progressToken": "c"}})).into_request();
    let response = app.clone().oneshot(req).await.expect("infallible");
    let mut body = response.into_body();
    let first = tokio::time::timeout(STOP_BOUND, body.frame()).await.expect("the tool's started event within 20 s");
    let first = first.expect("a frame").expect("data").into_data().expect("data frame");
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    assert!(!cancelled.load(Ordering::SeqCst));
    drop(body);
    let every = Duration::from_millis(10);
    wait_every("the tool to stop once the client left", STOP_BOUND, every, async || cancelled.load(Ordering::SeqCst))
        .await;
    // Leaving is the client's choice, not a server failure.
    let wanted = "mcpgate_requests_total{method=\"tools/call\",era=\"modern\",outcome=\"client_error\"} 1";
    let text = wait_every("a client_error recorded", STOP_BOUND, every, async || {
        let text = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
        if text.contains(wanted) { Look::Done(text) } else { Look::NotYet(text) }
    })
    .await;
    assert!(!text.contains("outcome=\"server_error\""), "{text}");
}

#[tokio::test]
async fn shutdown_ends_streams_with_a_retryable_error() {
    let cancelled = Arc::new(AtomicBool::new(false));
    let flag = cancelled.clone();
    let (app, state) = app_with(config(), move |b| {
        b.tool(WaitsForCancel {
            descriptor: ToolDescriptor::new("waits", "Waits to be cancelled.", json!({"type": "object"})),
            cancelled: flag,
        });
    })
    .await;
    let req = Req::modern("tools/call", json!({"name": "waits", "_meta": {"progressToken": "s"}})).into_request();
    let response = app.clone().oneshot(req).await.expect("infallible");
    let mut body = response.into_body();
    // Shut down once the tool runs (its started event is on the stream).
    let first = tokio::time::timeout(STOP_BOUND, body.frame()).await.expect("the tool's started event within 20 s");
    let first = first.expect("a frame").expect("data").into_data().expect("data frame");
    assert!(String::from_utf8_lossy(&first).contains("notifications/progress"));
    state.shutdown().cancel();
    let bytes = tokio::time::timeout(STOP_BOUND, body.collect())
        .await
        .expect("the stream ended within 20 s of the shutdown")
        .expect("body")
        .to_bytes();
    let text = String::from_utf8_lossy(&bytes);
    let last: Value = text
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).expect("json"))
        .expect("a final event");
    assert_eq!(last["id"], 1);
    assert_eq!(last["error"]["code"], -32603);
    assert!(last["error"]["message"].as_str().expect("message").contains("shutting down"), "{last}");
    assert!(cancelled.load(Ordering::SeqCst));
}
