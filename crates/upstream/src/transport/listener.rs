//! A 2025-era HTTP session's standalone GET stream, where servers announce list changes
//! outside any request: read until the session is dropped, reconnecting with backoff.
//!
//! Invariants: the server's requests seen there are handed to whoever can answer them (a
//! tracked upstream task's route, or the sole call in flight) or refused at once, never left
//! unanswered; an event left unfinished for `event_timeout_secs` drops the stream (it is opened
//! again); 405 (no such stream) or 404 (session gone) ends the listener for good.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap};

use super::Signals;
use super::sse::{Event, SseReader, Unfinished};
use crate::rpc::{self, Inbound};

/// What the listener of one session needs of its upstream.
pub(super) struct Listener {
    pub(super) client: reqwest::Client,
    pub(super) url: reqwest::Url,
    /// The configured headers (credentials: never logged).
    pub(super) headers: HeaderMap,
    pub(super) signals: Arc<Signals>,
    /// The upstream's name, for logs.
    pub(super) name: String,
    /// Most bytes of one event.
    pub(super) max: usize,
    pub(super) event_timeout: Duration,
}

impl Listener {
    /// Reads the stream of session `session` (protocol `version`) until `stop`: list changes
    /// raise the signal, the server's requests are refused (none of them is about a task we
    /// track).
    pub(super) async fn run(self, session: String, version: String, stop: tokio_util::sync::CancellationToken) {
        let Self { client, url, headers, signals, name, max, event_timeout } = self;
        let mut backoff = Duration::from_secs(1);
        loop {
            let request = client
                .get(url.clone())
                .headers(headers.clone())
                .header(ACCEPT, "text/event-stream")
                .header(MCP_PROTOCOL_VERSION, version.as_str())
                .header(MCP_SESSION_ID, session.as_str())
                .send();
            let response = tokio::select! {
                () = stop.cancelled() => return,
                r = request => r,
            };
            match response {
                Ok(r) if matches!(r.status().as_u16(), 404 | 405) => return,
                Ok(mut r) if r.status().is_success() => {
                    backoff = Duration::from_secs(1);
                    let mut reader = SseReader::new(max);
                    let mut unfinished = Unfinished::new(event_timeout);
                    let mut events = Vec::new();
                    loop {
                        let chunk = tokio::select! {
                            () = stop.cancelled() => return,
                            () = unfinished.expired() => {
                                tracing::warn!(
                                    upstream = %name,
                                    secs = unfinished.limit().as_secs(),
                                    "upstream GET stream left an event unfinished (event_timeout_secs); dropped"
                                );
                                break;
                            }
                            c = r.chunk() => c,
                        };
                        let Ok(Some(chunk)) = chunk else { break };
                        reader.feed(&chunk, &mut events);
                        unfinished.fed(&reader, &events);
                        for event in events.drain(..) {
                            let Event::Data(data) = event else { continue };
                            match rpc::parse(&data) {
                                Ok(Inbound::Notification { method }) if method.ends_with("/list_changed") => {
                                    signals.list_changed.notify_one();
                                }
                                Ok(Inbound::Request(request)) => {
                                    let Some(request) = signals.deliver(request).and_then(|r| signals.sole_taker(r))
                                    else {
                                        continue;
                                    };
                                    // Answered on a POST of the session, like any response.
                                    let refusal = rpc::reply_to_server_request(&request.id, &request.method);
                                    let _ = client
                                        .post(url.clone())
                                        .headers(headers.clone())
                                        .header(CONTENT_TYPE, "application/json")
                                        .header(ACCEPT, "application/json, text/event-stream")
                                        .header(MCP_PROTOCOL_VERSION, version.as_str())
                                        .header(MCP_SESSION_ID, session.as_str())
                                        .timeout(Duration::from_secs(5))
                                        .body(refusal)
                                        .send()
                                        .await;
                                }
                                _ => {}
                            }
                        }
                    }
                }
                Ok(r) => tracing::debug!(upstream = %name, status = %r.status(), "upstream GET stream refused"),
                Err(e) => {
                    // Without its URL: a query or userinfo may carry a credential.
                    let e = e.without_url();
                    tracing::debug!(upstream = %name, error = &e as &dyn std::error::Error, "upstream GET stream failed");
                }
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(30));
        }
    }
}
