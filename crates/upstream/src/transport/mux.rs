//! One multiplexed JSON-RPC connection over a message channel (a stdio child's pipes, a
//! 2024-11-05 HTTP+SSE session): requests go out through an outbox, answers come back in
//! any order and are matched to their callers by id, progress to the call that asked for
//! it, server requests get an answer.
//!
//! Invariants: a call that ends early (timeout, cancellation: its future dropped) leaves no
//! pending entry behind and tells the server with `notifications/cancelled`; once the
//! connection closes, every call in flight fails with the reason and no new call starts.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::{Exchange, Signals};
use crate::error::UpstreamError;
use crate::rpc::{self, Inbound, Negotiated, Progress};

type Reply = oneshot::Sender<Result<Box<RawValue>, UpstreamError>>;

struct Pending {
    reply: Reply,
    progress: Option<mpsc::Sender<Progress>>,
}

/// A multiplexed connection.
pub(super) struct Mux {
    pending: Mutex<HashMap<u64, Pending>>,
    outbox: mpsc::Sender<Vec<u8>>,
    closed: CancellationToken,
    reason: Mutex<Option<String>>,
    signals: Arc<Signals>,
    name: String,
    next_id: AtomicU64,
}

impl Mux {
    /// A connection whose outgoing messages go to `outbox` (the caller's writer drains it).
    pub(super) fn new(outbox: mpsc::Sender<Vec<u8>>, signals: Arc<Signals>, name: &str) -> Arc<Self> {
        Arc::new(Self {
            pending: Mutex::new(HashMap::new()),
            outbox,
            closed: CancellationToken::new(),
            reason: Mutex::new(None),
            signals,
            name: name.to_owned(),
            next_id: AtomicU64::new(1),
        })
    }

    /// Cancelled once the connection is closed.
    pub(super) fn closed(&self) -> &CancellationToken {
        &self.closed
    }

    /// Why it closed (once it has).
    pub(super) fn reason(&self) -> String {
        self.reason.lock().ok().and_then(|r| r.clone()).unwrap_or_else(|| "the connection closed".to_owned())
    }

    /// Closes the connection (the first reason given sticks) and fails every call in flight.
    /// `why` is text, an error's included (`describe`d, without its URL): one reason is shared
    /// by every call the connection fails, and the next start's message repeats it.
    pub(super) fn close(&self, why: String) {
        if let Ok(mut r) = self.reason.lock() {
            r.get_or_insert(why);
        }
        self.closed.cancel();
        let why = self.reason();
        let stranded: Vec<Pending> =
            self.pending.lock().map(|mut m| m.drain().map(|(_, p)| p).collect()).unwrap_or_default();
        for p in stranded {
            let _ = p.reply.send(Err(UpstreamError::closed(why.clone())));
        }
    }

    /// Sends a notification.
    pub(super) async fn notify(&self, bytes: Vec<u8>) {
        let _ = self.outbox.send(bytes).await;
    }

    /// Sends a request in the given era and waits for its answer.
    pub(super) async fn request(&self, mut ex: Exchange, era: &Negotiated) -> Result<Box<RawValue>, UpstreamError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        if ex.progress.is_some()
            && let Value::Object(params) = &mut ex.params
            && let Value::Object(meta) = params.entry("_meta").or_insert_with(|| json!({}))
        {
            meta.insert("progressToken".to_owned(), json!(id));
        }
        let bytes = rpc::request(id, ex.method, &mut ex.params, era);
        let (reply, answer) = oneshot::channel();
        let guard = PendingGuard { id, mux: self, done: false };
        if let Ok(mut map) = self.pending.lock() {
            map.insert(id, Pending { reply, progress: ex.progress });
        }
        if self.closed.is_cancelled() || self.outbox.send(bytes).await.is_err() {
            return Err(UpstreamError::closed(self.reason()));
        }
        let outcome = answer.await.unwrap_or_else(|_| Err(UpstreamError::closed(self.reason())));
        guard.finish();
        outcome
    }

    /// Handles one message from the server.
    pub(super) fn dispatch(&self, message: &[u8]) {
        if message.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        match rpc::parse(message) {
            Ok(Inbound::Response { id, outcome }) => {
                if let Some(p) = self.pending.lock().ok().and_then(|mut m| m.remove(&id)) {
                    let _ = p.reply.send(outcome);
                }
            }
            Ok(Inbound::Progress { token, progress }) => {
                let sink = self.pending.lock().ok().and_then(|m| m.get(&token).and_then(|p| p.progress.clone()));
                if let Some(sink) = sink {
                    let _ = sink.try_send(progress);
                }
            }
            Ok(Inbound::Notification { method }) => {
                if method.ends_with("/list_changed") {
                    self.signals.list_changed.notify_one();
                }
            }
            Ok(Inbound::Request(request)) => {
                if let Some(request) = self.signals.deliver(request) {
                    let _ = self.outbox.try_send(rpc::reply_to_server_request(&request.id, &request.method));
                }
            }
            Err(problem) => {
                let text = String::from_utf8_lossy(&message[..message.len().min(200)]).into_owned();
                tracing::warn!(upstream = %self.name, "ignored output that is not a JSON-RPC message ({problem}): {text}");
            }
        }
    }

    /// Handles a message too large to read (`prefix`: its first bytes): the call it answers
    /// fails saying so.
    pub(super) fn too_large(&self, prefix: &[u8], max: usize) {
        tracing::warn!(upstream = %self.name, max, "the server sent a message over max_message_bytes; skipped");
        if let Some(id) = rpc::sniff_id(prefix)
            && let Some(p) = self.pending.lock().ok().and_then(|mut m| m.remove(&id))
        {
            let _ = p.reply.send(Err(UpstreamError::protocol(format!(
                "the answer is larger than max_message_bytes ({max} bytes)"
            ))));
        }
    }

    /// Fails one call in flight (its message could not be delivered).
    pub(super) fn fail(&self, id: u64, error: UpstreamError) {
        if let Some(p) = self.pending.lock().ok().and_then(|mut m| m.remove(&id)) {
            let _ = p.reply.send(Err(error));
        }
    }

    /// Calls in flight.
    pub(super) fn in_flight(&self) -> usize {
        self.pending.lock().map_or(0, |m| m.len())
    }
}

/// Removes a call's pending entry when the call ends early (dropped on timeout or
/// cancellation) and tells the server to stop working on it.
struct PendingGuard<'a> {
    id: u64,
    mux: &'a Mux,
    done: bool,
}

impl PendingGuard<'_> {
    fn finish(mut self) {
        self.done = true;
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let was_pending = self.mux.pending.lock().ok().and_then(|mut m| m.remove(&self.id)).is_some();
        if was_pending {
            let _ = self.mux.outbox.try_send(rpc::cancelled(self.id));
        }
    }
}
