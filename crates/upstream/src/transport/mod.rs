//! Transports: how one request reaches an upstream and its answer comes back, with progress
//! relayed and cancellation forwarded. Each transport negotiates the protocol era itself
//! (a stdio child per process start, an HTTP upstream once, a legacy HTTP session again after
//! it expired).
//!
//! Layering: transports stand above `oauth` and import it (an `auth = "oauth"` upstream's 401
//! or 403 is read as an OAuth `Bearer` challenge), never the other way round; what both need
//! of HTTP (the TLS provider, an error's text without its URL) lives beneath both, in `tls`
//! and `error`.

mod client;
mod http;
mod legacy_sse;
mod listener;
mod mux;
mod pool;
mod reply;
mod sessions;
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
#[derive(Debug, Clone)]
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
    /// Where the server's requests sent on this request's own response stream go (2025-11-25
    /// HTTP upstreams asking mid-call, SEP-2260); `None`: they are refused at once.
    pub questions: Option<mpsc::Sender<ServerRequest>>,
    /// Whose session the request travels on (a principal key; `auth = "oauth"` HTTP upstreams
    /// keep one per principal); `None`: the shared one.
    pub holder: Option<Arc<str>>,
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
    /// Every request in flight, by id, with where the server's requests go if that one can
    /// answer them (see [`Signals::sole_taker`]).
    takers: Mutex<HashMap<u64, Option<mpsc::Sender<ServerRequest>>>>,
}

impl Signals {
    /// Routes the server's requests about upstream task `task` to the returned receiver until
    /// the route is dropped.
    pub(crate) fn route(self: &Arc<Self>, task: &str) -> Route {
        let (tx, rx) = mpsc::channel(8);
        self.routes.lock().unwrap_or_else(PoisonError::into_inner).insert(task.to_owned(), tx.clone());
        Route { signals: Arc::clone(self), task: task.to_owned(), sender: tx, requests: rx }
    }

    /// Registers request `id` as in flight, able to answer the server's requests (`taker`)
    /// or not (`None`: it still counts, see [`Signals::sole_taker`]).
    pub(crate) fn taking(self: &Arc<Self>, id: u64, taker: Option<mpsc::Sender<ServerRequest>>) -> Taking {
        self.takers.lock().unwrap_or_else(PoisonError::into_inner).insert(id, taker);
        Taking { signals: Arc::clone(self), id }
    }

    /// Hands a server request that came outside any request's stream (a 2025-11-25 session's
    /// standalone GET stream; SEP-2260 forbids it, yet SDK servers asking mid-call send it
    /// there) to the one request in flight, if it can answer: a server asks mid-call, so when
    /// only one request is in flight it is the one asking. With none, or several (whose
    /// question it is cannot be told: on a session shared by several callers, handing it to
    /// the one that can answer would show one caller another's question), gives it back to be
    /// refused.
    pub(crate) fn sole_taker(&self, request: ServerRequest) -> Option<ServerRequest> {
        let takers = self.takers.lock().unwrap_or_else(PoisonError::into_inner);
        match takers.values().next() {
            Some(Some(taker)) if takers.len() == 1 => {
                taker.try_send(request).err().map(mpsc::error::TrySendError::into_inner)
            }
            _ => Some(request),
        }
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

/// A call's registration as a taker of the server's requests (see [`Signals::taking`]);
/// removed when dropped.
#[derive(Debug)]
pub(crate) struct Taking {
    signals: Arc<Signals>,
    id: u64,
}

impl Drop for Taking {
    fn drop(&mut self) {
        self.signals.takers.lock().unwrap_or_else(PoisonError::into_inner).remove(&self.id);
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
    /// HTTP+SSE upstreams are asked for every list); and whether the upstream answered an
    /// exchange made for it now (which closes an open breaker).
    pub(crate) async fn offered(&self) -> Result<(Option<crate::rpc::Offered>, bool), UpstreamError> {
        match self {
            Self::Http(h) => h.offered().await,
            Self::Stdio(_) | Self::Sse(_) => Ok((None, false)),
        }
    }

    /// Sends a message that expects no answer (a response to a server's request); `bearer`:
    /// the exchanged token of the caller it answers for (HTTP only).
    pub(crate) async fn send_only(
        &self,
        bytes: Vec<u8>,
        bearer: Option<crate::token_cache::UpstreamToken>,
        holder: Option<Arc<str>>,
    ) -> Result<(), UpstreamError> {
        match self {
            Self::Stdio(s) => s.send_only(bytes).await,
            Self::Http(h) => h.send_only(bytes, bearer, holder).await,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn asked() -> ServerRequest {
        let id = serde_json::value::RawValue::from_string("7".to_owned()).expect("json");
        ServerRequest { id, method: "elicitation/create".to_owned(), params: None }
    }

    #[test]
    fn a_question_outside_any_stream_goes_only_to_the_sole_call_in_flight() {
        let signals = Arc::new(Signals::default());
        assert!(signals.sole_taker(asked()).is_some(), "no call in flight: refused");
        let (one, mut first) = mpsc::channel(1);
        let taking = signals.taking(1, Some(one));
        assert!(signals.sole_taker(asked()).is_none(), "taken");
        assert_eq!(first.try_recv().expect("delivered").method, "elicitation/create");
        let (two, mut second) = mpsc::channel(1);
        let other = signals.taking(2, Some(two));
        assert!(signals.sole_taker(asked()).is_some(), "two calls in flight: whose it is cannot be told");
        assert!(first.try_recv().is_err() && second.try_recv().is_err());
        drop(taking);
        assert!(signals.sole_taker(asked()).is_none(), "the other call, alone again");
        assert!(second.try_recv().is_ok());
        drop(other);
        assert!(signals.sole_taker(asked()).is_some());
        // A call that cannot answer (another caller's plain call) still makes the question's
        // owner uncertain: it is refused rather than shown to the one that can answer.
        let (three, mut third) = mpsc::channel(1);
        let answering = signals.taking(3, Some(three));
        let plain = signals.taking(4, None);
        assert!(signals.sole_taker(asked()).is_some(), "one of two calls in flight asked");
        assert!(third.try_recv().is_err());
        drop(plain);
        assert!(signals.sole_taker(asked()).is_none());
        drop(answering);
    }
}
