//! The browser's routes of users' connections to `auth = "oauth"` upstreams, on any replica:
//! the connect link, the sign-in's return, the upstream authorization's return (at the redirect
//! URI of its upstream and server; the retired `/oauth/callback` only says so), the gateway's
//! Client ID Metadata Document, and `DELETE /oauth/connections/<upstream>` (the caller's own
//! bearer) to disconnect.
//!
//! Invariant: every answer is a redirect, a short page or an empty 204 — never a token, a
//! sealed value's contents or an internal detail (those go to the log); the status says what
//! happened (`crate::error`'s wire mapping decides it).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE, LOCATION, REFERRER_POLICY, SET_COOKIE};
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get};
use serde::Deserialize;
use serde_json::json;

use crate::connections::{CALLBACK_PATH, CLIENT_METADATA_PATH, CallbackParams, Connector};
use crate::error::{ConnectFailure, GatewayError};
use crate::state::AppState;

/// The routes (mounted only with an `oauth` upstream).
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/oauth/connect/{sealed}", get(connect))
        .route("/oauth/login/callback", get(login_callback))
        .route(CALLBACK_PATH, get(retired_callback))
        .route(&format!("{CALLBACK_PATH}/{{upstream}}"), get(callback))
        .route(&format!("{CALLBACK_PATH}/{{upstream}}/{{server}}"), get(callback))
        .route("/oauth/connections/{upstream}", delete(disconnect))
        .route(CLIENT_METADATA_PATH, get(client_metadata))
}

fn connector(state: &AppState) -> Result<&Arc<Connector>, GatewayError> {
    state.connections.as_ref().ok_or_else(|| GatewayError::connect(ConnectFailure::NotFound, "no oauth upstream"))
}

/// `GET /oauth/connect/<sealed>`: on to the sign-in (or the upstream's server), with the
/// cookie the callbacks require of this browser.
async fn connect(State(state): State<AppState>, Path(sealed): Path<String>, headers: HeaderMap) -> Response {
    match async { connector(&state)?.open_link(&sealed, &headers).await }.await {
        Ok((url, cookie)) => {
            let mut response = redirect(&url);
            if let Ok(cookie) = cookie.parse() {
                response.headers_mut().insert(SET_COOKIE, cookie);
            }
            response
        }
        Err(e) => failure(&e),
    }
}

#[derive(Deserialize)]
struct LoginParams {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    state: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

/// `GET /oauth/login/callback`: the sign-in came back.
async fn login_callback(
    State(state): State<AppState>,
    Query(params): Query<LoginParams>,
    headers: HeaderMap,
) -> Response {
    let result = async {
        let connector = connector(&state)?;
        let (Some(code), Some(sealed)) = (params.code, params.state) else {
            let detail =
                params.error.map_or_else(|| "no code or state".to_owned(), |e| format!("sign-in error {e:.64}"));
            return Err(GatewayError::connect(ConnectFailure::Denied, detail));
        };
        connector.login_callback(&code, &sealed, &headers).await
    }
    .await;
    match result {
        Ok(url) => redirect(&url),
        Err(e) => failure(&e),
    }
}

/// `GET /oauth/callback`, the one redirect URI of earlier releases: it names no upstream or
/// server, so nothing that comes back to it is used (its state is left unopened).
async fn retired_callback() -> Response {
    failure(&GatewayError::connect(
        ConnectFailure::RetiredCallback,
        "an authorization came back to the retired redirect URI /oauth/callback",
    ))
}

/// `GET /oauth/callback/<upstream>[/<server>]`: an upstream's authorization server came back.
async fn callback(
    State(state): State<AppState>,
    uri: Uri,
    Query(params): Query<CallbackParams>,
    headers: HeaderMap,
) -> Response {
    match async { connector(&state)?.callback(uri.path(), params, &headers).await }.await {
        Ok(upstream) => page(
            StatusCode::OK,
            "Connected",
            &format!("Your account at {upstream} is connected. Return to your client and call the tool again."),
        ),
        Err(e) => failure(&e),
    }
}

/// `DELETE /oauth/connections/<upstream>`: the caller (by their own bearer) disconnects; the
/// tokens are revoked at the authorization server where it offers that (RFC 7009).
async fn disconnect(State(state): State<AppState>, Path(upstream): Path<String>, headers: HeaderMap) -> Response {
    let result = async {
        let principal = state.auth.authenticate(&headers).await?;
        let connector = connector(&state)?;
        // Forgets the record, then revokes its tokens where the server offers it (bounded).
        if connector.knows(&upstream) && connector.disconnect(principal.key(), &upstream).await? {
            tracing::info!(upstream = %upstream, "a user disconnected their account");
            return Ok(());
        }
        Err(GatewayError::connect(ConnectFailure::NotFound, "no such connection"))
    }
    .await;
    match result {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e @ GatewayError::Unauthorized { .. }) => {
            let wire = e.wire(None);
            let mut response = (e.connect_status(), e.to_string()).into_response();
            if let Some((name, value)) = wire.header
                && let Ok(value) = value.parse()
            {
                response.headers_mut().insert(name, value);
            }
            response
        }
        Err(e) => failure(&e),
    }
}

/// `GET /oauth/client-metadata.json`: the gateway as a client (its id is this document's URL).
async fn client_metadata(State(state): State<AppState>) -> Response {
    let Ok(connector) = connector(&state) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let document = json!({
        // A document's client_id is its own URL (one hosted elsewhere copies this with its own).
        "client_id": connector.public(CLIENT_METADATA_PATH),
        "client_name": "mcpgate",
        "redirect_uris": connector.metadata_redirect_uris(),
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    ([(CONTENT_TYPE, "application/json"), (CACHE_CONTROL, "public, max-age=3600")], document.to_string())
        .into_response()
}

fn redirect(url: &str) -> Response {
    // The URL carries sealed state: not to be cached, nor sent on as a referrer.
    (StatusCode::FOUND, [(LOCATION, url), (CACHE_CONTROL, "no-store"), (REFERRER_POLICY, "no-referrer")])
        .into_response()
}

fn failure(e: &GatewayError) -> Response {
    let status = e.connect_status();
    if status.is_server_error() {
        tracing::warn!(error = e as &dyn std::error::Error, detail = e.log_detail(), "a connection step failed");
    } else {
        tracing::info!(error = e as &dyn std::error::Error, detail = e.log_detail(), "a connection step was refused");
    }
    let message = match e {
        GatewayError::Connect { failure, .. } => failure.message().to_owned(),
        GatewayError::Store { .. } => "The gateway's store is unavailable; try again shortly.".to_owned(),
        _ => "Something went wrong; nothing was connected.".to_owned(),
    };
    page(status, "Not connected", &message)
}

/// A short HTML page (the texts are the gateway's own, escaped anyway).
fn page(status: StatusCode, title: &str, message: &str) -> Response {
    let escape = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let body = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{}</title></head><body><h1>{}</h1><p>{}</p></body></html>",
        escape(title),
        escape(title),
        escape(message)
    );
    (
        status,
        [(CONTENT_TYPE, "text/html; charset=utf-8"), (CACHE_CONTROL, "no-store"), (REFERRER_POLICY, "no-referrer")],
        body,
    )
        .into_response()
}
