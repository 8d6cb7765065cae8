//! Transports: how one request reaches an upstream and its answer comes back, with progress
//! relayed and cancellation forwarded. Each transport negotiates the protocol era itself
//! (a stdio child per process start, an HTTP upstream once, a legacy HTTP session again after
//! it expired).

pub(crate) mod http;
mod legacy_sse;
mod mux;
pub(crate) mod sse;
pub(crate) mod stdio;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{Notify, mpsc};

use crate::config::{TransportKind, UpstreamConfig};
use crate::error::UpstreamError;
use crate::rpc::{Progress, ServerRequest};

/// One request to an upstream.
#[derive(Debug)]
pub(crate) struct Exchange {
    /// The method.
    pub method: &'static str,
    /// Its params (an object); `_meta` is added for modern upstreams.
    pub params: Value,
    /// The `Mcp-Name` value (tool or prompt name, resource URI), for modern HTTP upstreams.
    pub name: Option<String>,
    /// `Mcp-Param-*` headers mirrored from the arguments, for modern HTTP upstreams.
    pub param_headers: Vec<(String, String)>,
    /// Where progress goes; the request then carries a progress token.
    pub progress: Option<mpsc::Sender<Progress>>,
    /// The caller's exchanged token, sent as `Authorization: Bearer` (HTTP upstreams with
    /// token exchange); `None`: the configured headers alone.
    pub bearer: Option<crate::token_cache::UpstreamToken>,
}

/// Signals an upstream raises for the rest of the gateway.
#[derive(Debug, Default)]
pub(crate) struct Signals {
    /// A `notifications/*/list_changed` arrived.
    pub list_changed: Notify,
    /// stdio processes started after the first.
    pub restarts: std::sync::atomic::AtomicU64,
    /// Who takes the server's requests about each upstream task (by its id).
    routes: Mutex<HashMap<String, mpsc::Sender<ServerRequest>>>,
}

impl Signals {
    /// Routes the server's requests about upstream task `task` to the returned receiver until
    /// the route is dropped.
    pub(crate) fn route(self: &Arc<Self>, task: &str) -> Route {
        let (tx, rx) = mpsc::channel(8);
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).insert(task.to_owned(), tx.clone());
        Route { signals: Arc::clone(self), task: task.to_owned(), sender: tx, requests: rx }
    }

    /// Hands a server request to the route of its task; gives it back when none takes it.
    pub(crate) fn deliver(&self, request: ServerRequest) -> Option<ServerRequest> {
        let Some(task) = request.related_task() else { return Some(request) };
        let route = self.routes.lock().unwrap_or_else(PoisonError::into_inner).get(&task).cloned();
        match route {
            Some(route) => route.try_send(request).err().map(|e| match e {
                mpsc::error::TrySendError::Full(r) | mpsc::error::TrySendError::Closed(r) => r,
            }),
            None => Some(request),
        }
    }
}

/// A route of server requests about one upstream task (see [`Signals::route`]).
#[derive(Debug)]
pub(crate) struct Route {
    signals: Arc<Signals>,
    task: String,
    /// Its own sender: a newer route of the same task (a resumed run) is not removed with it.
    sender: mpsc::Sender<ServerRequest>,
    /// The requests.
    pub(crate) requests: mpsc::Receiver<ServerRequest>,
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut routes = self.signals.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if routes.get(&self.task).is_some_and(|s| s.same_channel(&self.sender)) {
            routes.remove(&self.task);
        }
    }
}

/// A connected (or connectable) upstream.
#[derive(Debug)]
pub(crate) enum Link {
    Stdio(stdio::Stdio),
    Http(http::Http),
    Sse(legacy_sse::LegacySse),
}

impl Link {
    pub(crate) fn new(config: Arc<UpstreamConfig>, signals: Arc<Signals>) -> Result<Self, UpstreamError> {
        Ok(match config.transport {
            TransportKind::Stdio => Self::Stdio(stdio::Stdio::new(config, signals)),
            TransportKind::Http => Self::Http(http::Http::new(config, signals)?),
            TransportKind::Sse => Self::Sse(legacy_sse::LegacySse::new(config, signals)?),
        })
    }

    /// Sends one request and waits for its answer (dropping the future cancels it upstream).
    pub(crate) async fn exchange(&self, exchange: Exchange) -> Result<Box<RawValue>, UpstreamError> {
        match self {
            Self::Stdio(s) => s.exchange(exchange).await,
            Self::Http(h) => h.exchange(exchange).await,
            Self::Sse(s) => s.exchange(exchange).await,
        }
    }

    /// The lists the server offers, as its capabilities say; `None` when unknown (stdio and
    /// HTTP+SSE upstreams are asked for every list).
    pub(crate) async fn offered(&self) -> Result<Option<crate::rpc::Offered>, UpstreamError> {
        match self {
            Self::Http(h) => h.offered().await,
            Self::Stdio(_) | Self::Sse(_) => Ok(None),
        }
    }

    /// Sends a message that expects no answer (a response to a server's request); `bearer`:
    /// the exchanged token of the caller it answers for (HTTP only).
    pub(crate) async fn send_only(
        &self,
        bytes: Vec<u8>,
        bearer: Option<crate::token_cache::UpstreamToken>,
    ) -> Result<(), UpstreamError> {
        match self {
            Self::Stdio(s) => s.send_only(bytes).await,
            Self::Http(h) => h.send_only(bytes, bearer).await,
            Self::Sse(s) => s.send_only(bytes).await,
        }
    }

    /// Stops what runs (the stdio child).
    pub(crate) fn shutdown(&self) {
        match self {
            Self::Stdio(s) => s.shutdown(),
            Self::Sse(s) => s.shutdown(),
            Self::Http(_) => {}
        }
    }
}
