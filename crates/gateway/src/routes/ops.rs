//! Operational endpoints: liveness, readiness, Prometheus metrics and upstream status.

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::state::AppState;

/// `/metrics` and `/upstreams`, for the MCP listener or the admin listener to mount behind
/// their own Host/Origin policy.
pub(crate) fn observability() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics)).route("/upstreams", get(upstreams))
}

/// `/healthz`: the process is alive and serving HTTP.
pub(super) async fn healthz() -> &'static str {
    "ok\n"
}

/// `/readyz`: ready for traffic: not shutting down, the task store answers, and the task
/// workers run. False once shutdown has begun so load balancers drain us.
pub(super) async fn readyz(State(state): State<AppState>) -> Response {
    if state.stopping.is_cancelled() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    if let Err(e) = state.store.ping().await {
        tracing::warn!(error = &e as &dyn std::error::Error, "not ready: task store unavailable");
        return (StatusCode::SERVICE_UNAVAILABLE, "task store unavailable\n").into_response();
    }
    if !state.tasks.workers().is_alive() {
        return (StatusCode::SERVICE_UNAVAILABLE, "task workers stopped\n").into_response();
    }
    (StatusCode::OK, "ready\n").into_response()
}

/// `/metrics`: Prometheus text exposition.
pub(super) async fn metrics(State(state): State<AppState>) -> Response {
    let mut text = state.metrics.render();
    text.push_str(
        "# HELP mcpgate_tasks_running Tasks executing on this replica.\n# TYPE mcpgate_tasks_running gauge\n",
    );
    text.push_str(&format!("mcpgate_tasks_running {}\n", state.tasks.workers().running()));
    text.push_str(
        "# HELP mcpgate_worker_draining 1 while an operator has drained this replica (it claims no jobs).\n# TYPE mcpgate_worker_draining gauge\n",
    );
    text.push_str(&format!("mcpgate_worker_draining {}\n", u8::from(state.tasks.workers().is_draining())));
    state.tasks.metrics().render(&mut text);
    state.audit.render(&mut text);
    state.pinning.render(&mut text);
    if let Some(connector) = &state.connections {
        connector.stats.render(&mut text);
    }
    // The queue is shared: every replica reports the same depth (absent while Redis is down).
    match state.store.queue_depth().await {
        Ok(depth) => {
            text.push_str(
                "# HELP mcpgate_task_queue_depth Task jobs queued or held by a worker, all replicas.\n\
                 # TYPE mcpgate_task_queue_depth gauge\n",
            );
            text.push_str(&format!("mcpgate_task_queue_depth {depth}\n"));
        }
        Err(e) => tracing::debug!(error = &e as &dyn std::error::Error, "queue depth unavailable for /metrics"),
    }
    if let Some(store) = state.store.metrics() {
        store.render(&mut text);
    }
    crate::metrics::render_upstreams(&state.federation, &mut text);
    crate::policy::Policy::render_metrics_header(&mut text);
    for endpoint in std::iter::once(state.endpoints.root()).chain(state.endpoints.servers()) {
        endpoint.policy().render_metrics(endpoint.name(), &mut text);
    }
    let mut response = text.into_response();
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
    response
}

/// `/upstreams`: each upstream's breaker, counters and what it contributed to the catalog (on
/// this replica), as JSON. Upstream trouble never makes a replica unready: its calls fail
/// fast with a tool error instead.
pub(super) async fn upstreams(State(state): State<AppState>) -> Response {
    axum::Json(serde_json::json!({ "upstreams": state.federation.status() })).into_response()
}
