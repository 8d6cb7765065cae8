//! Health, readiness and metrics endpoints.

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use serde_json::json;

use crate::support::{Req, app, app_with, config};

#[tokio::test]
async fn health_and_readiness() {
    let (app, state) = app_with(config(), |_| {}).await;
    let resp = Req::get("/healthz").send(&app).await;
    assert_eq!(resp.status.as_u16(), 200);
    assert_eq!(Req::get("/readyz").send(&app).await.status.as_u16(), 200);
    state.stopping().cancel();
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
    let what = format!("{} to complete", done["taskId"]);
    let text = wait_every(what, Duration::from_secs(10), Duration::from_millis(30), async || {
        let text = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
        let completed = metric(&text, "mcpgate_tasks_total{tool=\"slow_compute\",event=\"completed\"} ").is_some();
        if completed { Look::Done(text) } else { Look::NotYet(text) }
    })
    .await;
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

/// `/metrics` and `/upstreams` obey the MCP endpoint's Host/Origin policy: a page in the
/// user's browser cannot read them from a loopback deployment.
#[tokio::test]
async fn metrics_and_upstreams_refuse_foreign_hosts_and_origins() {
    let app = app(config()).await;
    for path in ["/metrics", "/upstreams"] {
        assert_eq!(Req::get(path).send(&app).await.status.as_u16(), 200, "{path}");
        let foreign = Req::get(path).header("host", "evil.example.com").send(&app).await;
        assert_eq!(foreign.status.as_u16(), 403, "{path} with a foreign Host");
        let origin = Req::get(path).header("origin", "https://evil.example.com").send(&app).await;
        assert_eq!(origin.status.as_u16(), 403, "{path} with a foreign Origin");
    }
    // Probes carry whatever Host the orchestrator uses: liveness and readiness say nothing.
    assert_eq!(Req::get("/healthz").header("host", "10.1.2.3:8080").send(&app).await.status.as_u16(), 200);
}

/// With `admin.private_metrics`, `/metrics` and `/upstreams` leave the MCP listener for the
/// admin listener, where they need no token (the admin routes still do) and no browser may
/// reach anything.
#[tokio::test]
async fn private_metrics_are_served_on_the_admin_listener_only() {
    let mut c = config();
    c.admin.listen = Some("127.0.0.1:0".parse().expect("addr"));
    c.admin.token = Some(mcpgate::config::Secret::new("an-admin-token-of-at-least-32-characters"));
    c.admin.private_metrics = true;
    let (app, state) = app_with(c, |_| {}).await;
    let admin = mcpgate::admin::router(state);
    for path in ["/metrics", "/upstreams"] {
        assert_eq!(Req::get(path).send(&app).await.status.as_u16(), 404, "{path} on the MCP listener");
        assert_eq!(Req::get(path).send(&admin).await.status.as_u16(), 200, "{path} on the admin listener");
        let foreign = Req::get(path).header("host", "evil.example.com").send(&admin).await;
        assert_eq!(foreign.status.as_u16(), 403, "{path} with a foreign Host");
        let origin = Req::get(path).header("origin", "http://localhost:1").send(&admin).await;
        assert_eq!(origin.status.as_u16(), 403, "{path} with an Origin");
    }
    assert_eq!(Req::get("/admin/status").send(&admin).await.status.as_u16(), 401, "the API still needs the token");
    let metrics = String::from_utf8_lossy(&Req::get("/metrics").send(&admin).await.body).into_owned();
    assert!(metrics.contains("mcpgate_in_flight_requests"), "{metrics}");
}

/// HTTP/2 without TLS (h2c) carries the host as `:authority`, not `Host`: a loopback
/// listener admits it by that authority.
#[tokio::test]
async fn h2c_requests_are_checked_by_their_authority() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let state = mcpgate::AppState::new(config()).await.expect("state");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let server = tokio::spawn(mcpgate::serve(listener, state, async move { stopped.cancelled().await }));
    let client = reqwest::Client::builder().http2_prior_knowledge().build().expect("client");
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {
        "_meta": crate::support::meta(json!({}))}});
    for (host, status) in [("localhost", 200), ("127.0.0.1", 200)] {
        let resp = tokio::time::timeout(
            std::time::Duration::from_secs(10),
            client
                .post(format!("http://{host}:{port}/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .header("mcp-protocol-version", crate::support::MODERN)
                .header("mcp-method", "tools/list")
                .body(body.to_string())
                .send(),
        )
        .await
        .expect("answered in time")
        .expect("sent");
        assert_eq!(resp.version(), reqwest::Version::HTTP_2);
        assert_eq!(resp.status().as_u16(), status, "{host}");
        let metrics = client.get(format!("http://{host}:{port}/metrics")).send().await.expect("sent");
        assert_eq!(metrics.status().as_u16(), status, "/metrics at {host}");
    }
    stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), server).await;
}

/// Every way of cancelling a task counts it in `mcpgate_tasks_total{event="cancelled"}`: the
/// owner's `tasks/cancel` (above), the `task_cancel` companion, and the admin API.
#[tokio::test]
async fn every_way_of_cancelling_a_task_counts_it() {
    let token = "an-admin-token-of-at-least-32-characters";
    let mut c = config();
    c.admin.listen = Some("127.0.0.1:0".parse().expect("addr"));
    c.admin.token = Some(mcpgate::config::Secret::new(token));
    let (app, state) = app_with(c, |_| {}).await;
    let admin = mcpgate::admin::router(state);
    let call = |tool: &str, arguments: serde_json::Value| {
        Req::modern("tools/call", json!({"name": tool, "arguments": arguments}))
    };

    // A background task, cancelled by its companion.
    let started = call("background_report", json!({"topic": "moles", "seconds": 30})).send(&app).await.result();
    let id = started["structuredContent"]["taskId"].as_str().expect("a task id").to_owned();
    let cancelled = call("task_cancel", json!({"taskId": id})).send(&app).await.result();
    assert_ne!(cancelled["isError"], true, "{cancelled}");

    // A task cancelled by an operator.
    let caps = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let params = json!({"name": "slow_compute", "arguments": {"seconds": 60}});
    let task = Req::modern_with("tools/call", params, caps).send(&app).await.result();
    let id = task["taskId"].as_str().expect("a task id").to_owned();
    let resp = Req::get(&format!("/admin/tasks/{id}/cancel"))
        .method(axum::http::Method::POST)
        .header("authorization", &format!("Bearer {token}"))
        .send(&admin)
        .await;
    assert_eq!(resp.status.as_u16(), 200, "{}", String::from_utf8_lossy(&resp.body));

    let text = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
    for tool in ["background_report", "slow_compute"] {
        let line = format!("mcpgate_tasks_total{{tool=\"{tool}\",event=\"cancelled\"}} 1");
        assert!(text.contains(&line), "missing {line:?} in\n{text}");
    }
}
