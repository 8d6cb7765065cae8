//! `POST /mcp`: the request pipeline as named phases, each returning early with an error:
//! concurrency slot → Host/Origin → authentication → content type → Accept → body (bounded)
//! → JSON-RPC decoding → admission and dispatch (era rules, handler) → JSON or SSE response.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;

use mcpgate_protocol::{Era, Incoming, Method, ProtocolError, decode};

use super::headers::MCP_SESSION_ID;
use super::negotiate::{Accept, check_content_type, read_body};
use super::reply;
use crate::error::{ErrorReply, GatewayError};
use crate::mcp::{Reply, Ticket, dispatch};
use crate::metrics::{MethodLabel, Outcome};
use crate::state::AppState;

/// The MCP endpoint.
pub(super) async fn post_mcp(State(state): State<AppState>, headers: HeaderMap, body: Body) -> Response {
    let started = Instant::now();
    let Ok(permit) = state.limiter.clone().try_acquire_owned() else {
        state.metrics.record(MethodLabel::NONE, None, Outcome::ServerError, started.elapsed());
        return ErrorReply::bare(GatewayError::Overloaded).into_response();
    };
    let ticket = Ticket { permit, in_flight: state.metrics.start(), started };
    let mut label = MethodLabel::NONE;
    match handle(&state, &headers, body, ticket, &mut label).await {
        Ok((response, Record::ByStream)) => response,
        Ok((response, Record::Now(era))) => {
            state.metrics.record(label, era, Outcome::Ok, started.elapsed());
            response
        }
        Err(reply) => {
            let outcome = if reply.error.is_server_fault() { Outcome::ServerError } else { Outcome::ClientError };
            if matches!(reply.error, GatewayError::Unauthorized { .. }) {
                state.metrics.auth_failure();
            }
            state.metrics.record(label, reply.era, outcome, started.elapsed());
            reply.into_response()
        }
    }
}

/// Who records a successful request's metrics.
enum Record {
    /// The SSE task, when the stream ends.
    ByStream,
    /// The endpoint, now, with this era.
    Now(Option<Era>),
}

/// Returns the response and who records it.
async fn handle(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    ticket: Ticket,
    label: &mut MethodLabel,
) -> Result<(Response, Record), ErrorReply> {
    state.origin.check(headers)?;
    let principal = state.auth.authenticate(headers).await?;
    check_content_type(headers)?;
    let accept = Accept::from_headers(headers)?;
    let body = read_body(headers, body, state.config.http.body_limit_bytes).await?;
    let message = decode(&body).map_err(|e| {
        let id = match &e {
            ProtocolError::InvalidRequest { id, .. } => id.clone(),
            _ => None,
        };
        ErrorReply { error: e.into(), id, era: None }
    })?;
    let request = match message {
        Incoming::Notification(_) => {
            *label = MethodLabel::NOTIFICATION;
            return Ok((reply::accepted(), Record::Now(None)));
        }
        Incoming::Response(_) => {
            *label = MethodLabel::RESPONSE;
            return Ok((reply::accepted(), Record::Now(None)));
        }
        Incoming::Request(request) => request,
    };
    *label = Method::parse(&request.method).map_or(MethodLabel::UNKNOWN, MethodLabel::method);
    let (reply, era) = dispatch(state, headers, principal, &request, accept, ticket).await?;
    let response = match reply {
        Reply::Stream(response) => return Ok((response, Record::ByStream)),
        Reply::Result(result) => respond(reply::result_envelope(&request.id, &result), accept),
        Reply::Initialized { result, session_id } => {
            let mut response = respond(reply::result_envelope(&request.id, &result), accept);
            let value = HeaderValue::from_str(&session_id).map_err(|_| ErrorReply {
                error: GatewayError::internal("session id is not a header value"),
                id: Some(request.id.clone()),
                era: Some(era),
            })?;
            response.headers_mut().insert(MCP_SESSION_ID, value);
            response
        }
    };
    Ok((response, Record::Now(Some(era))))
}

/// JSON, or a one-event SSE stream for a client that accepts only SSE.
fn respond(envelope: bytes::Bytes, accept: Accept) -> Response {
    if accept.json {
        return reply::json(envelope);
    }
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    let _ = tx.try_send(envelope);
    drop(tx);
    let guard = tokio_util::sync::CancellationToken::new().drop_guard();
    reply::sse(rx, guard, std::time::Duration::from_secs(3600))
}

/// Any method but POST on the MCP endpoint.
pub(super) async fn not_allowed() -> Response {
    ErrorReply::bare(GatewayError::MethodNotAllowed).into_response()
}
