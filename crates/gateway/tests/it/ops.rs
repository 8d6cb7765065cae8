//! Health, readiness and metrics endpoints.

use serde_json::json;

use crate::support::{Req, app, app_with, config};

#[tokio::test]
async fn health_and_readiness() {
    let (app, state) = app_with(config(), |_| {}).await;
    let resp = Req::get("/healthz").send(&app).await;
    assert_eq!(resp.status.as_u16(), 200);
    assert_eq!(Req::get("/readyz").send(&app).await.status.as_u16(), 200);
    state.stopping.cancel();
    assert_eq!(Req::get("/readyz").send(&app).await.status.as_u16(), 503, "draining replicas are not ready");
    assert_eq!(Req::get("/healthz").send(&app).await.status.as_u16(), 200, "but still alive");
}

#[tokio::test]
async fn metrics_count_requests_by_method_era_and_outcome() {
    let app = app(config()).await;
    Req::modern("tools/list", json!({})).send(&app).await;
    Req::modern("tools/list", json!({})).send(&app).await;
    Req::modern("nope/nope", json!({})).send(&app).await;
    Req::post("{bad").send(&app).await;
    let resp = Req::get("/metrics").send(&app).await;
    assert!(resp.header("content-type").expect("ct").starts_with("text/plain"));
    let text = String::from_utf8_lossy(&resp.body).into_owned();
    for line in [
        "mcpgate_requests_total{method=\"tools/list\",era=\"modern\",outcome=\"ok\"} 2",
        "mcpgate_requests_total{method=\"unknown\",era=\"modern\",outcome=\"client_error\"} 1",
        "mcpgate_requests_total{method=\"none\",era=\"none\",outcome=\"client_error\"} 1",
        "mcpgate_request_duration_seconds_count{method=\"tools/list\"} 2",
        "mcpgate_request_duration_seconds_bucket{method=\"tools/list\",le=\"+Inf\"} 2",
        "mcpgate_in_flight_requests 0",
    ] {
        assert!(text.contains(line), "missing {line:?} in\n{text}");
    }
}

#[tokio::test]
async fn metrics_count_task_events_by_tool() {
    let app = app(config()).await;
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let create = |args: serde_json::Value| {
        Req::modern_with("tools/call", json!({"name": "slow_compute", "arguments": args}), caps.clone())
    };
    let done = create(json!({"seconds": 0})).send(&app).await.result();
    let running = create(json!({"seconds": 60})).send(&app).await.result();
    let cancel = json!({"taskId": running["taskId"]});
    Req::modern_with("tasks/cancel", cancel, caps.clone()).send(&app).await.result();
    let metric = |text: &str, line: &str| text.lines().find_map(|l| l.strip_prefix(line)).map(str::to_owned);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let text = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
        if metric(&text, "mcpgate_tasks_total{tool=\"slow_compute\",event=\"completed\"} ").is_some() {
            break text;
        }
        assert!(tokio::time::Instant::now() < deadline, "{} never completed:\n{text}", done["taskId"]);
        tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    };
    for (line, value) in [
        ("mcpgate_tasks_total{tool=\"slow_compute\",event=\"created\"} ", "2"),
        ("mcpgate_tasks_total{tool=\"slow_compute\",event=\"completed\"} ", "1"),
        ("mcpgate_tasks_total{tool=\"slow_compute\",event=\"cancelled\"} ", "1"),
        ("mcpgate_task_lease_renew_failures_total ", "0"),
    ] {
        assert_eq!(metric(&text, line).as_deref(), Some(value), "{line} in\n{text}");
    }
    assert!(metric(&text, "mcpgate_task_queue_depth ").is_some(), "{text}");
    assert!(!text.contains("mcpgate_redis_call"), "no Redis, no Redis metrics");
}

#[tokio::test]
async fn protected_resource_metadata_is_absent_without_auth() {
    let app = app(config()).await;
    assert_eq!(Req::get("/.well-known/oauth-protected-resource").send(&app).await.status.as_u16(), 404);
}
