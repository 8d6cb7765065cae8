//! Background tools for clients that know no tasks: the call answers at once with a task id;
//! `task_status`, `task_result` and `task_cancel` follow it, for its owner only.

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use serde_json::{Value, json};

use crate::support::{Req, app, claims, config, hs, hs256_config, initialize};

/// A tool call (modern, no tasks extension) with an optional bearer token.
async fn call(app: &axum::Router, tool: &str, arguments: Value, token: Option<&str>) -> Value {
    let mut req = Req::modern("tools/call", json!({"name": tool, "arguments": arguments}));
    if let Some(token) = token {
        req = req.header("authorization", &format!("Bearer {token}"));
    }
    req.send(app).await.result()
}

fn text(result: &Value) -> &str {
    result["content"][0]["text"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_background_call_answers_at_once_and_the_companions_follow_it() {
    let app = app(config()).await;
    let tools = Req::modern("tools/list", json!({})).send(&app).await.result();
    let names: Vec<&str> =
        tools["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    for companion in ["task_status", "task_result", "task_cancel"] {
        assert!(names.contains(&companion), "{companion} listed beside a background tool: {names:?}");
    }

    let started = call(&app, "background_report", json!({"topic": "otters", "seconds": 1}), None).await;
    assert_eq!(started["resultType"], "complete", "a plain result for a client that takes no tasks: {started}");
    let id = started["structuredContent"]["taskId"].as_str().expect("a task id").to_owned();
    assert!(text(&started).contains(&id) && text(&started).contains("task_status"), "{started}");

    let status = call(&app, "task_status", json!({"taskId": id}), None).await;
    assert!(["working", "completed"].contains(&status["structuredContent"]["status"].as_str().unwrap_or_default()));
    let done = wait_every(
        format_args!("task {id} to finish"),
        Duration::from_secs(10),
        Duration::from_millis(100),
        async || {
            let result = call(&app, "task_result", json!({"taskId": id}), None).await;
            if !text(&result).contains("still running") {
                return Look::Done(result);
            }
            assert_ne!(result["isError"], true, "still running is not an error: {result}");
            Look::NotYet(result.to_string())
        },
    )
    .await;
    assert_eq!(text(&done), "Report on otters: 1 sections compiled.", "the tool's own result: {done}");

    // Cancelled: the work stops, and the companions say so.
    let long = call(&app, "background_report", json!({"topic": "moles", "seconds": 30}), None).await;
    let id = long["structuredContent"]["taskId"].as_str().expect("a task id").to_owned();
    let cancelled = call(&app, "task_cancel", json!({"taskId": id}), None).await;
    assert!(text(&cancelled).contains("cancelled"), "{cancelled}");
    let status = call(&app, "task_status", json!({"taskId": id}), None).await;
    assert_eq!(status["structuredContent"]["status"], "cancelled", "{status}");
    assert_eq!(call(&app, "task_result", json!({"taskId": id}), None).await["isError"], true);

    // Unknown ids are a tool error the model can read, not a protocol error.
    let unknown = call(&app, "task_status", json!({"taskId": "no-such-task"}), None).await;
    assert_eq!(unknown["isError"], true, "{unknown}");

    // A 2025-11-25 session that asks for no task gets the same answer.
    let (session, _) = initialize(&app, "2025-11-25").await;
    let params = json!({"name": "background_report", "arguments": {"topic": "voles", "seconds": 1}});
    let legacy = Req::legacy("tools/call", params, Some(&session)).send(&app).await.result();
    assert!(legacy["structuredContent"]["taskId"].is_string(), "{legacy}");
}

#[tokio::test]
async fn the_companions_see_only_their_callers_tasks() {
    let app = app(hs256_config()).await;
    let (alice, bob) = (hs(&claims("alice")), hs(&claims("bob")));
    let started = call(&app, "background_report", json!({"topic": "secrets", "seconds": 30}), Some(&alice)).await;
    let id = started["structuredContent"]["taskId"].as_str().expect("a task id").to_owned();
    for companion in ["task_status", "task_result", "task_cancel"] {
        let theirs = call(&app, companion, json!({"taskId": id}), Some(&bob)).await;
        assert_eq!(theirs["isError"], true, "{companion}: {theirs}");
        assert!(text(&theirs).contains("not found"), "{companion}: {theirs}");
    }
    let mine = call(&app, "task_status", json!({"taskId": id}), Some(&alice)).await;
    assert_eq!(mine["structuredContent"]["status"], "working", "bob's cancel did nothing: {mine}");
    call(&app, "task_cancel", json!({"taskId": id}), Some(&alice)).await;
}

#[tokio::test]
async fn a_background_call_while_every_worker_is_busy_is_told_to_retry() {
    let mut c = config();
    c.tasks.max_running = 1;
    c.background.busy_retry_secs = 7;
    let app = app(c).await;
    let first = call(&app, "background_report", json!({"topic": "first", "seconds": 30}), None).await;
    let mut started = vec![first["structuredContent"]["taskId"].as_str().expect("a task id").to_owned()];
    // The first task takes the only worker once it is claimed; until then calls still start.
    let what = "a call answered busy with one worker taken";
    let busy = wait_every(what, Duration::from_secs(10), Duration::from_millis(50), async || {
        let next = call(&app, "background_report", json!({"topic": "next", "seconds": 30}), None).await;
        match next["structuredContent"]["taskId"].as_str() {
            Some(id) => {
                started.push(id.to_owned());
                Look::NotYet(next.to_string())
            }
            None => Look::Done(next),
        }
    })
    .await;
    assert_eq!(busy["isError"], true, "{busy}");
    assert_eq!(busy["structuredContent"], json!({"busy": true, "retryAfterSecs": 7}), "{busy}");
    assert!(text(&busy).contains("7 s"), "{busy}");
    let metrics = Req::get("/metrics").send(&app).await;
    let metrics = String::from_utf8_lossy(&metrics.body);
    assert!(metrics.contains("mcpgate_background_busy_total 1"), "{metrics}");
    for id in started {
        call(&app, "task_cancel", json!({"taskId": id}), None).await;
    }
}

#[tokio::test]
async fn companion_names_are_configurable_and_never_take_a_served_tools_name() {
    let mut renamed = config();
    renamed.background.status_tool = "report_status".to_owned();
    let app = app(renamed).await;
    let tools = Req::modern("tools/list", json!({})).send(&app).await.result();
    let names: Vec<&str> =
        tools["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"report_status") && !names.contains(&"task_status"), "{names:?}");
    let started = call(&app, "background_report", json!({"topic": "names", "seconds": 1}), None).await;
    assert!(text(&started).contains("Call report_status"), "the answer names the companion: {started}");

    // A Rust tool named like a companion: refused at build, naming the setting to change.
    let clash = mcpgate::Gateway::builder(config())
        .tool(mcpgate::typed_tool("task_cancel", "Mine.", |_: serde_json::Value| async {
            Ok::<_, mcpgate::ToolError>(mcpgate::Json(json!({})))
        }))
        .build()
        .await;
    assert!(
        matches!(&clash, Err(mcpgate::StartupError::Config { setting, .. }) if setting == "background.cancel_tool"),
        "{:?}",
        clash.err()
    );
}

/// With Redis gone, a companion answers that the task store is unavailable, and nothing of
/// Redis's own error (addresses, OS errors) reaches the client: that goes to the log.
#[tokio::test]
async fn a_companion_never_shows_the_clients_the_stores_own_error() {
    let mut redis = mcpgate_store::testing::RedisServer::start();
    let mut c = config();
    c.redis_url = Some(redis.url());
    c.seal.keys = vec![mcpgate::config::Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
    c.store.command_timeout_ms = 500;
    let app = app(c).await;
    let started = call(&app, "background_report", json!({"topic": "otters", "seconds": 30}), None).await;
    let id = started["structuredContent"]["taskId"].as_str().expect("a task id").to_owned();
    redis.stop();
    let port = redis.port().to_string();
    for companion in ["task_status", "task_result", "task_cancel"] {
        let reply = Req::modern("tools/call", json!({"name": companion, "arguments": {"taskId": id}})).send(&app).await;
        let json = reply.json();
        let message = json["error"]["message"].as_str().unwrap_or_else(|| panic!("{companion}: an error: {json}"));
        assert_eq!(message, "The task store is unavailable; try again shortly", "{companion}: {json}");
        assert!(!json.to_string().contains(&port), "{companion} leaks the store's address: {json}");
    }
}
