//! Writing responses: a JSON-RPC envelope around an already-serialized result, a plain JSON
//! response, and an SSE response that carries a request's notifications and then its result.
//!
//! Invariants: every JSON message is one line (compact serialization), so an SSE `data:` line
//! is one whole message; an SSE stream ends right after its final frame, whoever still holds a
//! sender; dropping the stream (the client closed it) cancels the work behind it.

use std::convert::Infallible;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes, BytesMut};
use futures_util::stream;
use tokio::sync::mpsc;
use tokio::time::{Instant, Interval, MissedTickBehavior, interval_at};
use tokio_util::sync::DropGuard;

use mcpgate_protocol::jsonrpc::ErrorResponse;
use mcpgate_protocol::{Era, RequestId};

pub(crate) use mcpgate_runtime::catalog::Frame;

use crate::error::GatewayError;

/// `{"jsonrpc":"2.0","id":<id>,"result":<result>}` around a serialized result.
pub(crate) fn result_envelope(id: &RequestId, result: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(result.len() + 48);
    out.put_slice(br#"{"jsonrpc":"2.0","id":"#);
    // An id is a string or an i64; serializing either cannot fail.
    let _ = serde_json::to_writer((&mut out).writer(), id);
    out.put_slice(br#","result":"#);
    out.put_slice(result);
    out.put_u8(b'}');
    out.freeze()
}

/// A JSON-RPC error response body for a request whose id is known.
pub(crate) fn error_envelope(id: &RequestId, error: &GatewayError, era: Option<Era>) -> Bytes {
    let wire = error.wire(era);
    serde_json::to_vec(&ErrorResponse::new(Some(id), &wire.error)).map(Bytes::from).unwrap_or_default()
}

/// A `200 application/json` response.
pub(crate) fn json(body: Bytes) -> Response {
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// `202 Accepted` with no body (notifications and responses).
pub(crate) fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

/// A one-event SSE response, for clients that accept only SSE.
pub(crate) fn sse_once(message: Bytes) -> Response {
    sse_response(Body::from(event(&message)))
}

struct SseState {
    rx: mpsc::Receiver<Frame>,
    /// A frame read before the response was chosen, sent first.
    first: Option<Frame>,
    keepalive: Interval,
    // Dropped with the stream: cancels the work when the client goes away.
    _cancel_on_drop: DropGuard,
    done: bool,
}

/// An SSE response fed by `rx` (after `first`, when given); keep-alive comments flow while
/// nothing else does.
pub(crate) fn sse(
    rx: mpsc::Receiver<Frame>,
    first: Option<Frame>,
    cancel_on_drop: DropGuard,
    keepalive: Duration,
) -> Response {
    let mut tick = interval_at(Instant::now() + keepalive, keepalive);
    tick.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let state = SseState { rx, first, keepalive: tick, _cancel_on_drop: cancel_on_drop, done: false };
    let events = stream::unfold(state, |mut s| async move {
        if s.done {
            return None;
        }
        if let Some(frame) = s.first.take() {
            let chunk = match frame {
                Frame::Notification(json) => event(&json),
                Frame::Final(json) => {
                    s.done = true;
                    event(&json)
                }
            };
            return Some((Ok::<_, Infallible>(chunk), s));
        }
        let chunk = tokio::select! {
            frame = s.rx.recv() => match frame? {
                Frame::Notification(json) => event(&json),
                Frame::Final(json) => {
                    s.done = true;
                    event(&json)
                }
            },
            _ = s.keepalive.tick() => Bytes::from_static(b": keep-alive\n\n"),
        };
        Some((Ok::<_, Infallible>(chunk), s))
    });
    sse_response(Body::from_stream(events))
}

fn event(json: &[u8]) -> Bytes {
    let mut event = BytesMut::with_capacity(json.len() + 8);
    event.put_slice(b"data: ");
    event.put_slice(json);
    event.put_slice(b"\n\n");
    event.freeze()
}

fn sse_response(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}
