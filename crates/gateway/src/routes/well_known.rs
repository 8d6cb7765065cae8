//! OAuth 2.0 Protected Resource Metadata (RFC 9728) at `/.well-known/oauth-protected-resource`
//! and its path-inserted form, so clients can find the authorization server. A virtual
//! server is a protected resource of its own: its metadata is at the path-inserted form of
//! its path and names its own URL as `resource`.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::AuthMode;
use crate::state::AppState;

/// The root's metadata document; 404 when authentication is off.
pub(super) async fn protected_resource(State(state): State<AppState>) -> Response {
    document(&state, None)
}

/// The path-inserted form: a virtual server's document for its path, else the root's.
pub(super) async fn protected_resource_at(State(state): State<AppState>, Path(resource): Path<String>) -> Response {
    let path = format!("/{}", resource.trim_start_matches('/'));
    let server = state.endpoints.at_path(&path).and_then(|s| s.resource().map(|r| (s.name().to_owned(), r.to_owned())));
    document(&state, server)
}

/// The document; `server`: a virtual server's name and resource URI.
fn document(state: &AppState, server: Option<(String, String)>) -> Response {
    let auth = &state.config.auth;
    if auth.mode == AuthMode::None {
        return StatusCode::NOT_FOUND.into_response();
    }
    let (resource, name) = match server {
        Some((name, resource)) => (Some(resource), format!("mcpgate {name}")),
        None => (auth.resource.clone().or_else(|| auth.jwt.audience.clone()), "mcpgate".to_owned()),
    };
    let mut doc = json!({
        "resource": resource,
        "authorization_servers": auth.authorization_servers,
        "bearer_methods_supported": ["header"],
        "resource_name": name,
    });
    if !auth.scopes_supported.is_empty() {
        doc["scopes_supported"] = json!(auth.scopes_supported);
    }
    Json(doc).into_response()
}
