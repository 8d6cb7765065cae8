//! OAuth 2.0 Protected Resource Metadata (RFC 9728) at `/.well-known/oauth-protected-resource`
//! and its path-inserted form, so clients can find the authorization server.

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::AuthMode;
use crate::state::AppState;

/// The metadata document; 404 when authentication is off.
pub(super) async fn protected_resource(State(state): State<AppState>) -> Response {
    let auth = &state.config.auth;
    if auth.mode == AuthMode::None {
        return StatusCode::NOT_FOUND.into_response();
    }
    let mut doc = json!({
        "resource": auth.resource.clone().or_else(|| auth.jwt.audience.clone()),
        "authorization_servers": auth.authorization_servers,
        "bearer_methods_supported": ["header"],
        "resource_name": "mcpgate",
    });
    if !auth.scopes_supported.is_empty() {
        doc["scopes_supported"] = json!(auth.scopes_supported);
    }
    Json(doc).into_response()
}
