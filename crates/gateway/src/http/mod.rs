//! The HTTP surface: routes, the MCP endpoint pipeline and the pieces it is made of.

mod endpoint;
pub mod headers;
pub mod negotiate;
pub(crate) mod ops;
pub mod origin;
pub mod reply;
mod well_known;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{get, post};

use crate::state::AppState;

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// All routes of a replica's MCP listener. `/metrics` and `/upstreams` answer only requests
/// the Host/Origin policy admits, and not at all with `admin.private_metrics` (then the admin
/// listener serves them).
pub fn router(state: AppState) -> Router {
    let mut router = Router::new()
        .route(MCP_PATH, post(endpoint::post_mcp).get(endpoint::get_mcp).fallback(endpoint::not_allowed))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/.well-known/oauth-protected-resource", get(well_known::protected_resource))
        .route("/.well-known/oauth-protected-resource/{*resource}", get(well_known::protected_resource));
    if !state.config.admin.private_metrics {
        router = router.merge(ops::observability().route_layer(from_fn_with_state(state.clone(), origin::guard)));
    }
    router.with_state(state)
}
