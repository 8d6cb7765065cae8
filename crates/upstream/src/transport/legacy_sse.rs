//! The 2024-11-05 HTTP+SSE transport, for servers that still speak it: a GET opens an event
//! stream whose first `endpoint` event names where to POST messages; every answer arrives on
//! the stream. One session per replica, opened lazily and opened again after the stream ends.
//!
//! Invariants: the POST endpoint must be on the same origin as the configured URL (a server
//! cannot send the gateway's credentials elsewhere); no event is buffered past
//! `max_message_bytes`; an event left unfinished for `event_timeout_secs` ends the stream (an
//! upstream cannot hold it, and the calls on it, with an event that never completes); when the
//! stream ends, every call in flight on it fails with the reason.

use std::sync::Arc;

use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::client::client_for;
use super::mux::Mux;
use super::sse::{Event, SseReader, Unfinished};
use super::stdio::negotiate;
use super::{Exchange, Signals};
use crate::config::{EraChoice, UpstreamConfig, redact_url};
use crate::error::{UpstreamError, describe, unlocated};
use crate::rpc::{self, Negotiated};

struct Session {
    mux: Arc<Mux>,
    negotiated: Negotiated,
}

/// A 2024-11-05 HTTP+SSE upstream.
pub(crate) struct LegacySse {
    config: Arc<UpstreamConfig>,
    signals: Arc<Signals>,
    client: reqwest::Client,
    headers: HeaderMap,
    session: tokio::sync::Mutex<Option<Arc<Session>>>,
    stop: CancellationToken,
}

impl std::fmt::Debug for LegacySse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacySse").field("upstream", &self.config.name).finish_non_exhaustive()
    }
}

impl LegacySse {
    pub(crate) fn new(config: Arc<UpstreamConfig>, signals: Arc<Signals>) -> Result<Self, UpstreamError> {
        let (client, headers) = client_for(&config)?;
        Ok(Self {
            config,
            signals,
            client,
            headers,
            session: tokio::sync::Mutex::new(None),
            stop: CancellationToken::new(),
        })
    }

    pub(crate) fn shutdown(&self) {
        self.stop.cancel();
    }

    pub(crate) async fn exchange(&self, ex: Exchange) -> Result<Box<RawValue>, UpstreamError> {
        let session = self.session().await?;
        session.mux.request(ex, &session.negotiated).await
    }

    /// POSTs a message that expects no answer on the current session.
    pub(crate) async fn send_only(&self, bytes: Vec<u8>) -> Result<(), UpstreamError> {
        self.session().await?.mux.notify(bytes).await;
        Ok(())
    }

    async fn session(&self) -> Result<Arc<Session>, UpstreamError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = &*slot
            && !session.mux.closed().is_cancelled()
        {
            return Ok(session.clone());
        }
        let session = tokio::time::timeout(self.config.connect_timeout(), self.open()).await.unwrap_or_else(|_| {
            Err(UpstreamError::unreachable(format!("no session within {} s", self.config.connect_timeout_secs)))
        })?;
        tracing::info!(upstream = %self.config.name, version = session.negotiated.version(), "upstream connected (HTTP+SSE)");
        let session = Arc::new(session);
        *slot = Some(session.clone());
        Ok(session)
    }

    /// Opens the event stream, learns the POST endpoint, starts the writer, and initializes.
    async fn open(&self) -> Result<Session, UpstreamError> {
        let url = self.config.url.as_deref().unwrap_or_default();
        let response = self
            .client
            .get(url)
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .send()
            .await
            .map_err(|e| UpstreamError::Unreachable { detail: None, source: Some(unlocated(e)) })?;
        if !response.status().is_success() {
            return Err(UpstreamError::unreachable(format!("HTTP {} opening the event stream", response.status())));
        }
        let (outbox_tx, mut outbox) = mpsc::channel::<Vec<u8>>(256);
        let mux = Mux::new(outbox_tx, self.signals.clone(), &self.config.name);
        let abort = mux.closed().clone().drop_guard();
        let (endpoint_tx, endpoint_rx) = oneshot::channel::<Vec<u8>>();

        // Reader: the endpoint first, then every message to the connection.
        let max = usize::try_from(self.config.max_message_bytes).unwrap_or(usize::MAX);
        let (reader_mux, stop) = (mux.clone(), self.stop.clone());
        let mut unfinished = Unfinished::new(self.config.event_timeout());
        tokio::spawn(async move {
            let mut response = response;
            let mut reader = SseReader::new(max);
            let mut events = Vec::new();
            let mut endpoint_tx = Some(endpoint_tx);
            let closed = reader_mux.closed().clone();
            let why = loop {
                let chunk = tokio::select! {
                    c = response.chunk() => c,
                    () = closed.cancelled() => return,
                    () = stop.cancelled() => break "the gateway is shutting down".to_owned(),
                    () = unfinished.expired() => break format!(
                        "the server left an event unfinished for {} s (event_timeout_secs)",
                        unfinished.limit().as_secs()
                    ),
                };
                match chunk {
                    Ok(Some(bytes)) => {
                        reader.feed(&bytes, &mut events);
                        unfinished.fed(&reader, &events);
                    }
                    Ok(None) => break "the server ended the event stream".to_owned(),
                    // Text: the reason is the stream's (see `Mux::close`).
                    Err(e) => break format!("the event stream broke: {}", describe(e)),
                }
                for event in events.drain(..) {
                    match event {
                        Event::Endpoint(data) => {
                            if let Some(tx) = endpoint_tx.take() {
                                let _ = tx.send(data);
                            }
                        }
                        Event::Data(data) => reader_mux.dispatch(&data),
                        Event::TooLarge(prefix) => reader_mux.too_large(&prefix, max),
                    }
                }
            };
            reader_mux.close(why);
        });

        let endpoint =
            endpoint_rx.await.map_err(|_| UpstreamError::protocol(format!("no endpoint event: {}", mux.reason())))?;
        let endpoint = resolve_endpoint(url, &String::from_utf8_lossy(&endpoint))?;

        // Writer: each message POSTed in order; a refused request fails its call at once.
        let (writer_mux, client, headers) = (mux.clone(), self.client.clone(), self.headers.clone());
        tokio::spawn(async move {
            let closed = writer_mux.closed().clone();
            while let Some(message) = tokio::select! { m = outbox.recv() => m, () = closed.cancelled() => None } {
                let id = rpc::sniff_id(&message);
                let sent = client
                    .post(&endpoint)
                    .headers(headers.clone())
                    .header(CONTENT_TYPE, "application/json")
                    .body(message)
                    .send()
                    .await;
                let refused = match sent {
                    Ok(r) if r.status().is_success() => continue,
                    Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => {
                        writer_mux.close("the server forgot the session (HTTP 404)".to_owned());
                        break;
                    }
                    Ok(r) => UpstreamError::unreachable(format!("the message was refused: HTTP {}", r.status())),
                    Err(e) => UpstreamError::Unreachable {
                        detail: Some("the message was refused".to_owned()),
                        source: Some(unlocated(e)),
                    },
                };
                if let Some(id) = id {
                    writer_mux.fail(id, refused);
                }
            }
        });

        let negotiated = negotiate(&self.config, EraChoice::V2025_11_25, &mux).await?;
        abort.disarm();
        Ok(Session { mux, negotiated })
    }
}

/// The POST endpoint an `endpoint` event names, resolved against the stream's URL; only the
/// same origin is accepted.
fn resolve_endpoint(base: &str, endpoint: &str) -> Result<String, UpstreamError> {
    let endpoint = endpoint.trim();
    let (scheme, rest) = base.split_once("://").unwrap_or(("http", base));
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let origin = format!("{scheme}://{authority}");
    let resolved = if endpoint.starts_with("http://") || endpoint.starts_with("https://") {
        endpoint.to_owned()
    } else if endpoint.starts_with('/') {
        format!("{origin}{endpoint}")
    } else {
        let dir = base.rsplit_once('/').map_or(base, |(dir, _)| dir);
        format!("{dir}/{endpoint}")
    };
    let same_origin = resolved.strip_prefix(&origin).is_some_and(|r| r.is_empty() || r.starts_with(['/', '?']));
    if !same_origin {
        return Err(UpstreamError::protocol(format!(
            "the server named a message endpoint on another origin ({})",
            redact_url(&resolved)
        )));
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::resolve_endpoint;

    #[test]
    fn endpoints_resolve_on_the_same_origin_only() {
        let base = "http://127.0.0.1:3001/sse";
        assert_eq!(
            resolve_endpoint(base, "/message?sessionId=a").unwrap(),
            "http://127.0.0.1:3001/message?sessionId=a"
        );
        assert_eq!(resolve_endpoint(base, "messages?s=1").unwrap(), "http://127.0.0.1:3001/messages?s=1");
        assert_eq!(resolve_endpoint(base, "http://127.0.0.1:3001/m").unwrap(), "http://127.0.0.1:3001/m");
        assert!(resolve_endpoint(base, "http://evil.example/m").is_err());
        assert!(resolve_endpoint(base, "http://127.0.0.1:30010/m").is_err());
    }
}
