//! The future that resolves when the process is asked to stop (SIGTERM or SIGINT).
//!
//! Invariant: the signals are taken over when [`signal`] is called, not when its future is
//! first polled, so a stop asked for right after a replica says where it listens (as scripts
//! and supervisors do) is a graceful shutdown, never the default action that kills the process
//! outright.

use std::future::Future;

/// Resolves on SIGTERM or SIGINT (Ctrl-C). Call it before announcing the listener; it must be
/// called inside a Tokio runtime.
pub fn signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal as take_over};
        let term = take_over(SignalKind::terminate());
        let interrupt = take_over(SignalKind::interrupt());
        async move {
            let wait = |taken: std::io::Result<tokio::signal::unix::Signal>, name: &'static str| async move {
                match taken {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(e) => {
                        tracing::error!(error = &e as &dyn std::error::Error, "cannot listen for {name}");
                        std::future::pending::<()>().await;
                    }
                }
            };
            tokio::select! {
                () = wait(interrupt, "SIGINT") => tracing::info!("SIGINT received"),
                () = wait(term, "SIGTERM") => tracing::info!("SIGTERM received"),
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            if let Err(e) = tokio::signal::ctrl_c().await {
                tracing::error!(error = &e as &dyn std::error::Error, "cannot listen for Ctrl-C");
                std::future::pending::<()>().await;
            }
            tracing::info!("Ctrl-C received");
        }
    }
}
