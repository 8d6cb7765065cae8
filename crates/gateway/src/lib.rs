//! mcpgate: a stateless, horizontally scalable gateway for the Model Context Protocol that
//! serves both protocol eras (2026-07-28 and 2025-11-25) from one endpoint.
//!
//! # As a library
//!
//! [`Gateway::builder`] takes a [`Config`] and tools written in Rust — plain async functions
//! over a typed argument struct ([`typed_tool`]), background tools with a progress handle
//! ([`background_tool`]), or any [`Tool`] (a resumable tool that asks the user for input
//! returns [`Outcome::NeedInput`]) — builds a gateway and serves it until a shutdown future
//! resolves. Upstream servers from the config join the same catalog. Runnable examples are in
//! `crates/gateway/examples/`.
//!
//! Lower down, [`app`] is the router (for in-process tests) and [`serve`] serves a listener
//! until a shutdown future resolves; `main.rs` only loads the config and calls them.
#![deny(missing_docs)]

pub mod admin;
mod auth;
mod call_context;
mod catalog_parts;
mod catalog_refresh;
pub mod config;
pub mod error;
mod gateway;
mod http;
mod limits;
mod mcp;
mod metrics;
mod principal_slots;
pub mod probe;
pub mod shutdown;
mod startup;
pub mod state;
mod tasks;
pub mod telemetry;
mod time;

/// Internals that this crate's own tests and benchmarks drive directly: no stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::mcp::{session, task_view};
}

use std::future::{Future, IntoFuture};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

pub use config::Config;
pub use error::{GatewayError, StartupError};
pub use gateway::{Gateway, GatewayBuilder};
/// The MCP wire types (results, content blocks, input requests).
pub use mcpgate_protocol as protocol;
pub use mcpgate_runtime::Principal;
/// Tools, prompts and resources (re-exported for registering custom ones).
pub use mcpgate_runtime::catalog;
pub use mcpgate_runtime::catalog::{
    Failure, Json, Outcome, Progress, Tool, ToolCall, ToolContext, ToolDescriptor, ToolError, ToolOutput, ask,
    background_tool, typed_tool,
};
/// The JSON Schema derive typed tools' arguments use (`#[derive(schemars::JsonSchema)]`).
pub use schemars;
pub use state::AppState;
/// The token a background tool's work watches for cancellation.
pub use tokio_util::sync::CancellationToken;

/// The router of a replica.
pub fn app(state: AppState) -> Router {
    http::router(state)
}

/// Serves until `shutdown` resolves, then stops accepting, lets in-flight requests and task
/// runs finish for up to `shutdown.grace_secs`, cancels the requests still running and hands
/// the tasks still running back to other replicas.
pub async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_admin(listener, None, state, shutdown).await
}

/// [`serve`], and the admin API on `admin` (see [`admin`]) until shutdown begins.
pub async fn serve_with_admin(
    listener: TcpListener,
    admin: Option<TcpListener>,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    if let Some(admin) = admin {
        let state = state.clone();
        tokio::spawn(async move {
            if let Err(e) = admin::serve(admin, state).await {
                tracing::error!(error = %e, "the admin API stopped");
            }
        });
    }
    let stopping = state.stopping.clone();
    let drain = Duration::from_secs(state.config.shutdown.drain_secs);
    let graceful = async move {
        shutdown.await;
        // Report "not ready" first and keep accepting for the drain period, so a load balancer
        // polling /readyz stops routing here before connections are refused.
        stopping.cancel();
        tokio::time::sleep(drain).await;
    };
    // No Nagle delay: SSE events and small replies go out as soon as they are written
    // (otherwise a stream's final event can wait for the client's delayed ACK, ~40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let server = axum::serve(listener, app(state.clone())).with_graceful_shutdown(graceful).into_future();
    tokio::pin!(server);
    let grace = Duration::from_secs(state.config.shutdown.grace_secs);
    let grace_over = async {
        state.stopping.cancelled().await;
        tokio::time::sleep(drain + grace).await;
    };
    tokio::pin!(grace_over);
    tokio::select! {
        result = &mut server => {
            // Every connection closed within the grace period. Running tasks may use the rest
            // of it; then they are stopped and handed back to other replicas. (Should the server
            // end on its own, this starts the shutdown and its grace period.)
            state.stopping.cancel();
            tokio::select! {
                () = state.tasks.workers().finished() => {}
                () = &mut grace_over => tracing::info!("shutdown grace period over; handing running tasks back"),
            }
            state.shutdown.cancel();
            state.in_flight.close();
            state.in_flight.wait().await;
            state.tasks.workers().stopped(Duration::from_secs(5)).await;
            state.federation.shutdown();
            return result;
        }
        () = &mut grace_over => tracing::warn!("shutdown grace period over; cancelling remaining requests"),
    }
    state.shutdown.cancel();
    state.in_flight.close();
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        state.in_flight.wait().await;
        let _ = (&mut server).await;
    })
    .await;
    state.tasks.workers().stopped(Duration::from_secs(5)).await;
    state.federation.shutdown();
    Ok(())
}

/// The library example of docs/library.md, compiled as a doctest so it stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
struct ReadmeDoctests;
