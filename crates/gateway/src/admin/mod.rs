//! The admin API: an operator's view of every task, of the live fleet (`fleet`) and of this
//! replica's workers, on a listener of its own (`admin.listen`), and the `mcpgate admin`
//! command that calls it.
//!
//! Threat model: anyone who can reach the admin port may send anything. The admin token
//! (`admin.token`, at least 32 characters) is the only authority: it is compared through
//! digests in constant time, never logged, and without it every route answers 401 and does
//! nothing — except `/metrics` and `/upstreams`, read-only as on any operations port, so a
//! scraper needs no token that could also cancel tasks. The MCP listener never serves the
//! admin routes, so an MCP client's credentials never reach them. No browser has business
//! here: a request with an `Origin` is refused, and so is a foreign `Host` on a loopback
//! listener (DNS rebinding). Task payloads (arguments, answers, state,
//! results) are never read, let alone shown, unless `admin.show_payloads` is set. Every action
//! that changes something is logged with the task it touched.

mod client;
mod credentials;
mod fleet;
mod pins;
mod routes;
mod view;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::net::TcpListener;

use crate::error::GatewayError;
use crate::origin::OriginPolicy;
use crate::state::AppState;

pub use client::{AdminArgs, run as run_command};

/// The admin routes behind the token check, and `/metrics` and `/upstreams` beside them; all
/// behind the admin listener's Host/Origin policy.
pub fn router(state: AppState) -> Router {
    let loopback = state.config.admin.listen.is_none_or(|addr| addr.ip().is_loopback());
    let policy = std::sync::Arc::new(OriginPolicy::admin(loopback));
    routes::routes()
        .merge(credentials::routes())
        .merge(pins::routes())
        .merge(fleet::routes())
        .layer(axum::middleware::from_fn_with_state(state.clone(), authorize))
        .merge(crate::routes::ops::observability())
        // An admin answer even for a path it does not serve, so `mcpgate admin` can tell
        // this listener from any other (its MCP port answers a bare 404).
        .fallback(|uri: axum::http::Uri| async move {
            failure(&GatewayError::AdminNoRoute { path: uri.path().chars().take(200).collect() })
        })
        .layer(axum::middleware::from_fn(move |request: Request, next: Next| {
            let policy = policy.clone();
            async move {
                match policy.check(request.headers(), request.uri()) {
                    Ok(()) => next.run(request).await,
                    Err(error) => failure(&error),
                }
            }
        }))
        .with_state(state)
}

/// Serves the admin API on `listener` until the replica starts shutting down.
pub async fn serve(listener: TcpListener, state: AppState) -> std::io::Result<()> {
    if let Ok(addr) = listener.local_addr()
        && !addr.ip().is_loopback()
    {
        tracing::warn!(%addr, "the admin API listens beyond loopback: keep its port off public networks");
    }
    let stopping = state.stopping.clone();
    axum::serve(listener, router(state)).with_graceful_shutdown(async move { stopping.cancelled().await }).await
}

/// Lets a request through only with `Authorization: Bearer <admin.token>`.
async fn authorize(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")));
    let expected = state.config.admin.token.as_ref().map(|t| t.expose());
    match (presented, expected) {
        (Some(presented), Some(expected)) if same(presented, expected) => next.run(request).await,
        _ => failure(&GatewayError::AdminUnauthorized),
    }
}

/// Constant-time equality of two secrets (of their digests, so lengths leak nothing either).
fn same(a: &str, b: &str) -> bool {
    let (a, b) = (mcpgate_seal::context_digest(&[a.as_bytes()]), mcpgate_seal::context_digest(&[b.as_bytes()]));
    a.iter().zip(b.iter()).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// An error as the admin API answers it: its status and `{"error": message}`.
fn failure(error: &GatewayError) -> Response {
    let status = error.admin_status();
    if status.is_server_error() {
        tracing::warn!(error = error as &dyn std::error::Error, detail = error.log_detail(), "admin request failed");
    }
    let mut response = (status, axum::Json(json!({ "error": error.to_string() }))).into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"mcpgate-admin\""));
    }
    response
}

/// A handler's error, answered by [`failure`].
struct Failed(GatewayError);

impl<E: Into<GatewayError>> From<E> for Failed {
    fn from(e: E) -> Self {
        Self(e.into())
    }
}

impl IntoResponse for Failed {
    fn into_response(self) -> Response {
        failure(&self.0)
    }
}
