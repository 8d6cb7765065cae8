//! What a tool, prompt or resource sees of the request it serves: the caller, the client's
//! declared capabilities, a progress reporter, a logger and a cancellation token.
//!
//! Invariant: notifications go out only when the request opted in (a `progressToken` for
//! progress, a `logLevel` at or below the message's level for logs) and only on that
//! request's own response stream.

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::jsonrpc::OutgoingNotification;
use mcpgate_protocol::meta::{LoggingLevel, ProgressParams, ProgressToken};
use mcpgate_protocol::method::notification;

use crate::auth::Principal;
use crate::http::reply::Frame;

/// Where a request's notifications go (its SSE stream), if it has one.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    sink: Option<mpsc::Sender<Frame>>,
}

impl Notifier {
    /// A notifier writing to an SSE stream.
    pub fn new(sink: mpsc::Sender<Frame>) -> Self {
        Self { sink: Some(sink) }
    }

    /// Whether notifications have anywhere to go.
    pub fn is_streaming(&self) -> bool {
        self.sink.is_some()
    }

    /// Queues a notification without waiting: progress and logs are advisory, so when a
    /// client reads slower than the tool reports, notifications are dropped rather than
    /// stalling the tool (a closed stream means the client left; cancellation handles that).
    fn send<P: serde::Serialize>(&self, method: &str, params: &P) {
        let Some(sink) = &self.sink else { return };
        match serde_json::to_vec(&OutgoingNotification::new(method, params)) {
            Ok(bytes) => {
                if let Err(mpsc::error::TrySendError::Full(_)) = sink.try_send(Frame::Notification(Bytes::from(bytes)))
                {
                    tracing::debug!(method, "client reads slowly; notification dropped");
                }
            }
            Err(e) => tracing::warn!(error = %e, method, "notification not serializable"),
        }
    }
}

/// The context of one invocation.
#[derive(Debug, Clone)]
pub struct ToolContext {
    principal: Principal,
    capabilities: ClientCapabilities,
    progress_token: Option<ProgressToken>,
    log_level: Option<LoggingLevel>,
    notifier: Notifier,
    cancel: CancellationToken,
}

impl ToolContext {
    /// Builds a context.
    pub fn new(
        principal: Principal,
        capabilities: ClientCapabilities,
        progress_token: Option<ProgressToken>,
        log_level: Option<LoggingLevel>,
        notifier: Notifier,
        cancel: CancellationToken,
    ) -> Self {
        Self { principal, capabilities, progress_token, log_level, notifier, cancel }
    }

    /// A context with no client behind it (tests, benchmarks).
    pub fn detached(principal: Principal, capabilities: ClientCapabilities) -> Self {
        Self::new(principal, capabilities, None, None, Notifier::default(), CancellationToken::new())
    }

    /// The caller.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// What the client declared for this request.
    pub fn capabilities(&self) -> &ClientCapabilities {
        &self.capabilities
    }

    /// Reports progress, if the request asked for it.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        let Some(token) = &self.progress_token else {
            return;
        };
        let params =
            ProgressParams { progress_token: token.clone(), progress, total, message: message.map(str::to_owned) };
        self.notifier.send(notification::PROGRESS, &params);
    }

    /// Sends a log message, if the request opted in at this level or a lower one.
    pub async fn log(&self, level: LoggingLevel, data: Value) {
        if self.log_level.is_some_and(|min| level >= min) {
            let params = json!({ "level": level, "logger": "mcpgate", "data": data });
            self.notifier.send(notification::MESSAGE, &params);
        }
    }

    /// Resolves when the client goes away or the call is cancelled.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }
}
