//! Serving a replica: its router, and the shutdown sequence — report "not ready", keep
//! accepting through `shutdown.drain_secs`, let requests and task runs finish within
//! `shutdown.grace_secs`, then cancel what still runs and hand running tasks back to other
//! replicas.
//!
//! Invariant: a replica that stops leaves no task behind it (its leases are released or lapse)
//! and no request hanging (each one finishes, or is cancelled when the grace period ends).

use std::future::{Future, IntoFuture};
use std::time::Duration;

use axum::Router;
use tokio::net::TcpListener;

use crate::admin;
use crate::routes;
use crate::state::AppState;

/// The router of a replica.
pub fn app(state: AppState) -> Router {
    routes::router(state)
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
                tracing::error!(error = &e as &dyn std::error::Error, "the admin API stopped");
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
            tracing::debug!(error = &e as &dyn std::error::Error, "could not set TCP_NODELAY");
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
    // The last transitions and requests are in the trail before the process exits.
    if !state.audit.flush(Duration::from_secs(5)).await {
        tracing::warn!("audit lines still queued at exit were not all written within 5 s");
    }
    Ok(())
}
