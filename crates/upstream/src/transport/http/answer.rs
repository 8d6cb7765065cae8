//! Reading an HTTP upstream's answer to one request: a JSON body, or an SSE stream whose
//! progress is relayed as it arrives and whose server requests are routed or refused; a
//! 2025-11-25 stream that ends before the answer is resumed (SEP-1699) a bounded number of
//! times.
//!
//! Invariants: only the answer to this request's id is taken (a connection that carries
//! another is not kept); no body or event is buffered past `max_message_bytes`, and an event
//! over it fails the call unless it is another message's; an error body is read to at most
//! `MAX_ERROR_BODY` bytes.

use std::time::Duration;

use mcpgate_protocol::headers::{LAST_EVENT_ID, MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use reqwest::StatusCode;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use tokio::sync::mpsc;

use super::{Http, Posted, Session, response_exchange};
use crate::error::{UpstreamError, unlocated};
use crate::rpc::{self, Inbound, Negotiated};
use crate::transport::Exchange;
use crate::transport::client::bearer_header;
use crate::transport::reply::Reply;
use crate::transport::sse::{Event, SseReader};

/// Most bytes of an error body read (to find a JSON-RPC error in it).
const MAX_ERROR_BODY: usize = 64 * 1024;
/// Times one answer's event stream is resumed (2025-11-25 `Last-Event-ID`) before the call
/// fails; the call's timeout bounds them too.
const MAX_RESUMES: u32 = 8;
/// The wait before resuming a stream that named no `retry` delay.
const DEFAULT_RETRY_MS: u64 = 1000;
/// The longest `retry` delay honoured (a larger one is cut to this).
const MAX_RETRY_MS: u64 = 30_000;

impl Http {
    /// Reads the answer to request `id` from a JSON body or an SSE stream.
    pub(super) async fn read_answer(
        &self,
        session: &Session,
        mut response: Reply<'_>,
        id: u64,
        ex: &Exchange,
    ) -> Result<Posted, UpstreamError> {
        let status = response.status();
        let max = usize::try_from(self.config.max_message_bytes).unwrap_or(usize::MAX);
        if status == StatusCode::NOT_FOUND && session.negotiated == Negotiated::Modern {
            // 2026-07-28 answers an unknown method with 404 and -32601: "not supported", not
            // "down". A 404 without a JSON-RPC error (a wrong URL) is a failure to reach it.
            let body = read_body(&mut response, MAX_ERROR_BODY).await.unwrap_or_default();
            let inbound = rpc::parse(&body);
            discard_unless_answer(&mut response, &inbound, id);
            return Ok(Posted::Answer(Err(match inbound {
                // Only the answer to this request (a stray one may be another caller's).
                Ok(Inbound::Response { id: got, outcome: Err(e @ UpstreamError::Rpc { .. }) }) if got == id => e,
                _ => UpstreamError::unreachable(format!("HTTP {status}")),
            })));
        }
        if status == StatusCode::NOT_FOUND {
            // To a session request: the session is gone and nothing ran (`exchange` decides).
            return Ok(Posted::SessionGone);
        }
        if status == StatusCode::ACCEPTED {
            return Ok(Posted::Accepted);
        }
        if matches!(status.as_u16(), 401 | 403) && self.config.is_oauth() {
            // The caller's token refused or short of scope (`Upstream` refreshes it once, or asks
            // to reconnect), or the call refused to this caller (a 403 without `insufficient_scope`).
            let values = response.headers().get_all(reqwest::header::WWW_AUTHENTICATE);
            let challenge = crate::oauth::BearerChallenge::parse(values.iter().filter_map(|v| v.to_str().ok()));
            return Ok(Posted::Answer(Err(crate::oauth::refused(status.as_u16(), challenge))));
        }
        if !status.is_success() {
            let body = read_body(&mut response, MAX_ERROR_BODY).await.unwrap_or_default();
            let inbound = rpc::parse(&body);
            discard_unless_answer(&mut response, &inbound, id);
            return Ok(Posted::Answer(Err(match inbound {
                Ok(Inbound::Response { id: got, outcome: Err(e) }) if got == id => e,
                _ => UpstreamError::unreachable(format!("HTTP {status}")),
            })));
        }
        let is_sse = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        if !is_sse {
            let body = read_body(&mut response, max).await?;
            let inbound = rpc::parse(&body);
            discard_unless_answer(&mut response, &inbound, id);
            return Ok(Posted::Answer(match inbound {
                Ok(Inbound::Response { id: got, outcome }) if got == id => outcome,
                Ok(_) => Err(UpstreamError::protocol("the body is not the answer to the request")),
                Err(e) => Err(e),
            }));
        }
        // Boxed: a stream's reading (and resuming) is the bulk of this future's size, which
        // every plain JSON answer would otherwise carry (and copy) too.
        Box::pin(self.read_stream(session, response, id, ex)).await
    }

    /// Reads the answer to request `id` from an SSE stream. A 2025-11-25 stream that ends
    /// before the answer is resumed (SEP-1699): after the `retry` delay it asked for, a GET
    /// with `Last-Event-ID` carries on where it stopped.
    async fn read_stream(
        &self,
        session: &Session,
        mut response: Reply<'_>,
        id: u64,
        ex: &Exchange,
    ) -> Result<Posted, UpstreamError> {
        let max = usize::try_from(self.config.max_message_bytes).unwrap_or(usize::MAX);
        let (mut last_id, mut retry_ms) = (None::<String>, None::<u64>);
        let mut resumed = 0;
        loop {
            let mut reader = SseReader::new(max);
            let ended = self.read_events(session, response, &mut reader, id, ex).await;
            last_id = reader.last_event_id().map(str::to_owned).or(last_id);
            retry_ms = reader.retry_ms().or(retry_ms);
            let cause = match ended {
                Ok(Some(posted)) => return Ok(posted),
                Ok(None) => UpstreamError::closed("the event stream ended without an answer"),
                Err(e) => e,
            };
            let (Some(sid), Some(last)) = (session.id.as_deref(), last_id.as_deref()) else { return Err(cause) };
            if resumed == MAX_RESUMES {
                return Err(cause);
            }
            resumed += 1;
            let delay = retry_ms.unwrap_or(DEFAULT_RETRY_MS).min(MAX_RETRY_MS);
            tokio::time::sleep(Duration::from_millis(delay)).await;
            response = self.resume(session, sid, last, ex).await?;
        }
    }

    /// Asks to resume a session's event stream after `last` (a GET with `Last-Event-ID`).
    async fn resume(
        &self,
        session: &Session,
        sid: &str,
        last: &str,
        ex: &Exchange,
    ) -> Result<Reply<'_>, UpstreamError> {
        let mut request = self
            .client
            .get(self.url.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, "text/event-stream")
            .header(MCP_PROTOCOL_VERSION, session.negotiated.version())
            .header(MCP_SESSION_ID, sid)
            .header(LAST_EVENT_ID, last);
        if let Some(value) = ex.bearer.as_ref().and_then(bearer_header) {
            request = request.header(AUTHORIZATION, value);
        }
        let response = request.send().await.map_err(|e| UpstreamError::Closed {
            detail: "the event stream ended and could not be resumed".to_owned(),
            source: Some(unlocated(e)),
        })?;
        if !response.status().is_success() {
            return Err(UpstreamError::closed(format!(
                "the event stream ended and could not be resumed: HTTP {}",
                response.status()
            )));
        }
        Ok(Reply::General(response))
    }

    /// Reads one event stream until the answer to request `id` (`Some`) or its end (`None`).
    async fn read_events(
        &self,
        session: &Session,
        mut response: Reply<'_>,
        reader: &mut SseReader,
        id: u64,
        ex: &Exchange,
    ) -> Result<Option<Posted>, UpstreamError> {
        let progress = ex.progress.as_ref();
        let max = usize::try_from(self.config.max_message_bytes).unwrap_or(usize::MAX);
        let mut events = Vec::new();
        loop {
            let chunk = response
                .chunk()
                .await
                .map_err(|e| UpstreamError::Closed { detail: "the event stream broke".to_owned(), source: Some(e) })?;
            let Some(chunk) = chunk else { return Ok(None) };
            reader.feed(&chunk, &mut events);
            for event in events.drain(..) {
                match event {
                    // Another message's is skipped; the answer's, or one that cannot be told
                    // (a flood of empty `data` lines), fails the call.
                    Event::TooLarge(prefix) => match rpc::sniff_id(&prefix) {
                        Some(other) if other != id => {}
                        Some(_) => {
                            return Ok(Some(Posted::Answer(Err(UpstreamError::protocol(format!(
                                "the answer is larger than max_message_bytes ({max} bytes)"
                            ))))));
                        }
                        None => {
                            return Ok(Some(Posted::Answer(Err(UpstreamError::protocol(format!(
                                "the server sent an event larger than max_message_bytes ({max} bytes)"
                            ))))));
                        }
                    },
                    Event::Endpoint(_) => {}
                    Event::Data(data) => match rpc::parse(&data) {
                        Ok(Inbound::Response { id: got, outcome }) if got == id => {
                            return Ok(Some(Posted::Answer(outcome)));
                        }
                        // Another request's answer on this one's stream: the connection is out
                        // of step with its requests and is not kept.
                        Ok(Inbound::Response { .. }) => response.discard(),
                        Ok(Inbound::Progress { token, progress: p }) if token == id => {
                            if let Some(sink) = progress {
                                let _ = sink.try_send(p);
                            }
                        }
                        Ok(Inbound::Notification { method }) if method.ends_with("/list_changed") => {
                            self.signals.list_changed.notify_one();
                        }
                        // A request of the server's on the stream: to whoever tracks its task,
                        // else to this call's own taker, or refused at once (left unanswered,
                        // the server would wait for ever).
                        Ok(Inbound::Request(request)) => {
                            let unrouted = self.signals.deliver(request).and_then(|r| match &ex.questions {
                                Some(taker) => taker.try_send(r).err().map(mpsc::error::TrySendError::into_inner),
                                None => Some(r),
                            });
                            if let Some(request) = unrouted {
                                let refusal = rpc::reply_to_server_request(&request.id, &request.method);
                                // For the caller whose request the stream answers.
                                let reply = Exchange { bearer: ex.bearer.clone(), ..response_exchange() };
                                if let Err(e) = Box::pin(self.send(session, refusal, &reply)).await {
                                    tracing::debug!(upstream = %self.config.name, error = &e as &dyn std::error::Error, "refusal not delivered");
                                }
                            }
                        }
                        Ok(_) => {}
                        Err(e) => {
                            tracing::debug!(
                                upstream = %self.config.name,
                                error = &e as &dyn std::error::Error,
                                "ignored an event that is not JSON-RPC"
                            );
                        }
                    },
                }
            }
        }
    }
}

/// Closes the connection an answer came on unless the answer is request `id`'s: an answer to
/// another request (or none at all) means the connection is out of step with its requests, and
/// what it carries next could reach the wrong caller.
fn discard_unless_answer(response: &mut Reply<'_>, inbound: &Result<Inbound, UpstreamError>, id: u64) {
    if !matches!(inbound, Ok(Inbound::Response { id: got, .. }) if *got == id) {
        response.discard();
    }
}

/// Reads a whole body, failing past `max` bytes.
async fn read_body(response: &mut Reply<'_>, max: usize) -> Result<Vec<u8>, UpstreamError> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| UpstreamError::Closed { detail: "reading the answer failed".to_owned(), source: Some(e) })?
    {
        if body.len() + chunk.len() > max {
            return Err(UpstreamError::protocol(format!("the answer is larger than max_message_bytes ({max} bytes)")));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
