//! The routes of a replica's MCP listener: the MCP endpoints' pipeline (the root's and each
//! virtual server's), health and readiness,
//! metrics and upstream status, and the protected resource metadata.
//!
//! Invariant: every route that answers a browser-reachable request goes through the Host/Origin
//! policy (the MCP endpoint in its pipeline, `/metrics` and `/upstreams` through [`guard`]).

mod endpoint;
mod oauth;
pub(crate) mod ops;
mod well_known;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Uri};
use axum::middleware::{Next, from_fn_with_state};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{MethodRouter, any, get, post};

use crate::error::ErrorReply;
use crate::servers::Endpoint;
use crate::state::AppState;

pub(crate) use crate::config::MCP_PATH;

/// All routes of a replica's MCP listener. `/metrics` and `/upstreams` answer only requests
/// the Host/Origin policy admits, and not at all with `admin.private_metrics` (then the admin
/// listener serves them).
pub(crate) fn router(state: AppState) -> Router {
    let root = if state.config.root_endpoint {
        mcp_routes(state.endpoints.root().clone())
    } else {
        any(|| async { axum::http::StatusCode::NOT_FOUND })
    };
    let mut router = Router::new().route(MCP_PATH, root);
    for server in state.endpoints.servers() {
        router = router.route(server.path(), mcp_routes(server.clone()));
    }
    let mut router = router
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/.well-known/oauth-protected-resource", get(well_known::protected_resource))
        .route("/.well-known/oauth-protected-resource/{*resource}", get(well_known::protected_resource_at));
    if state.connections.is_some() {
        router = router.merge(oauth::routes());
    }
    if !state.config.admin.private_metrics {
        router = router.merge(ops::observability().route_layer(from_fn_with_state(state.clone(), guard)));
    }
    router.with_state(state)
}

/// The MCP pipeline of one endpoint (the root or a virtual server): bound to it here, so a
/// request finds its endpoint without a lookup.
fn mcp_routes(served: Arc<Endpoint>) -> MethodRouter<AppState> {
    let for_get = served.clone();
    // The request is taken whole and split: the `Uri` and `HeaderMap` extractors would clone
    // them.
    post(move |State(state): State<AppState>, request: Request<Body>| {
        let (parts, body) = request.into_parts();
        endpoint::post_mcp(state, served.clone(), parts.uri, parts.headers, body)
    })
    .get(move |State(state): State<AppState>, uri: Uri, headers: HeaderMap| {
        endpoint::get_mcp(state, for_get.clone(), uri, headers)
    })
    .fallback(endpoint::not_allowed)
}

/// Middleware for the operational routes of the MCP listener (`/metrics`, `/upstreams`): the
/// same Host/Origin policy as the MCP endpoint, so a page in the user's browser cannot read
/// them from a loopback deployment.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match state.origin.check(request.headers(), request.uri()) {
        Ok(()) => next.run(request).await,
        Err(error) => ErrorReply::bare(error).into_response(),
    }
}
