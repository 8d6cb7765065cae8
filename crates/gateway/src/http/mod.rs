//! The HTTP surface: routes, the MCP endpoint pipeline and the pieces it is made of.

mod endpoint;
pub mod headers;
pub mod negotiate;
mod ops;
pub mod origin;
pub mod reply;
mod well_known;

use axum::Router;
use axum::routing::{get, post};

use crate::state::AppState;

/// Path of the MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

/// All routes of a replica.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route(MCP_PATH, post(endpoint::post_mcp).get(endpoint::get_mcp).fallback(endpoint::not_allowed))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .route("/upstreams", get(ops::upstreams))
        .route("/.well-known/oauth-protected-resource", get(well_known::protected_resource))
        .route("/.well-known/oauth-protected-resource/{*resource}", get(well_known::protected_resource))
        .with_state(state)
}
