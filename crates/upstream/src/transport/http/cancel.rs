//! Forwarding a call's cancellation to a 2025-era HTTP session when the call ends early: a
//! `notifications/cancelled` POSTed on the session, with the caller's own token. A modern
//! upstream sees its request's connection close instead, and needs nothing.
//!
//! Invariant: the cancellation goes with the token of the caller whose call it cancels, or not
//! at all; it costs nothing unless the call is dropped.

use std::time::Duration;

use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap};

use crate::rpc;
use crate::token_cache::UpstreamToken;
use crate::transport::client::bearer_header;

/// Forwards a cancellation upstream when a call to a legacy session is dropped before it
/// [`finish`](CancelGuard::finish)es.
pub(super) struct CancelGuard<'a> {
    /// The upstream's client, endpoint and configured headers: where the cancellation goes.
    pub(super) client: &'a reqwest::Client,
    pub(super) url: &'a reqwest::Url,
    pub(super) headers: &'a HeaderMap,
    /// The session id and protocol version the call went on; `None`: no session (a modern
    /// upstream), nothing to forward.
    pub(super) session: Option<(&'a str, &'a str)>,
    /// The call's request id.
    pub(super) id: u64,
    /// The call's exchanged token: the cancellation is the same caller's.
    pub(super) bearer: Option<&'a UpstreamToken>,
}

impl CancelGuard<'_> {
    /// The call ended with its answer (or its error): nothing to cancel.
    pub(super) fn finish(mut self) {
        self.session = None;
    }
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        let Some((sid, version)) = self.session else { return };
        // The caller's cancellation goes with the caller's token, or not at all.
        let bearer = match self.bearer.map(bearer_header) {
            Some(None) => return,
            Some(Some(value)) => Some(value),
            None => None,
        };
        let Ok(handle) = tokio::runtime::Handle::try_current() else { return };
        let mut request = self
            .client
            .post(self.url.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .header(MCP_PROTOCOL_VERSION, version)
            .header(MCP_SESSION_ID, sid)
            .timeout(Duration::from_secs(5))
            .body(rpc::cancelled(self.id));
        if let Some(bearer) = bearer {
            request = request.header(AUTHORIZATION, bearer);
        }
        handle.spawn(async move {
            let _ = request.send().await;
        });
    }
}
