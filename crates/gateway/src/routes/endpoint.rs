//! `POST /mcp` (and a virtual server's path): the request pipeline as named phases, each
//! returning early with an error: concurrency slot → Host/Origin → authentication → content type → Accept → body (bounded)
//! → JSON-RPC decoding → admission and dispatch (era rules, handler) → JSON or SSE response.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Uri};
use axum::response::{IntoResponse, Response};
use tokio::time::Instant;
use tracing::Span;
use tracing::field::Empty;

use mcpgate_protocol::{Era, Incoming, Method, ProtocolError, ProtocolVersion, decode};

use crate::error::{ErrorReply, GatewayError, is_caused_by};
use crate::http::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use crate::http::negotiate::{Accept, BodyLimits, check_content_type, read_body};
use crate::http::reply;
use crate::mcp::{Reply, Ticket, answer_task_input, dispatch, session};
use crate::metrics::{MethodLabel, Outcome};
use crate::servers::Endpoint;
use crate::state::AppState;

/// The MCP endpoint. Its span carries the request's method, era, a pseudonymous principal id
/// and the task it creates or touches (filled in as they become known), so every log line and
/// exported span of the request has them.
#[tracing::instrument(
    name = "mcp",
    skip_all,
    fields(server = endpoint.name(), method = Empty, era = Empty, principal = Empty, task = Empty)
)]
pub(super) async fn post_mcp(
    state: AppState,
    endpoint: Arc<Endpoint>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let Ok(permit) = state.limiter.clone().try_acquire_owned() else {
        state.metrics.record(MethodLabel::NONE, None, Outcome::ServerError, started.elapsed());
        return ErrorReply::bare(GatewayError::Overloaded).into_response();
    };
    let ticket = Ticket { permit: Some(permit), in_flight: state.metrics.start(), started };
    let mut label = MethodLabel::NONE;
    match handle(&state, &endpoint, &uri, &headers, body, ticket, &mut label).await {
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

/// Returns the response and who records it. The futures of its phases that may be large
/// (authentication, which may fetch a JWKS; the rarer message kinds) are boxed, so this one
/// stays small: axum moves it into a box of its own, and unboxed it would be copied whole
/// (tens of KiB) on every request.
async fn handle(
    state: &AppState,
    endpoint: &Arc<Endpoint>,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
    ticket: Ticket,
    label: &mut MethodLabel,
) -> Result<(Response, Record), ErrorReply> {
    state.origin.check(headers, uri)?;
    let principal = Box::pin(authenticate(state, endpoint, headers)).await?;
    let span = Span::current();
    if !span.is_disabled() {
        span.record("principal", principal.log_id());
    }
    check_content_type(headers)?;
    let accept = Accept::from_headers(headers)?;
    let limits = BodyLimits {
        max_bytes: state.config.http.body_limit_bytes,
        timeout: Duration::from_secs(state.config.http.body_timeout_secs),
    };
    let body = read_body(headers, body, limits, &state.body_budget).await?;
    let message = decode(&body.bytes).map_err(|e| {
        let id = match &e {
            ProtocolError::InvalidRequest { id, .. } => id.clone(),
            _ => None,
        };
        ErrorReply { error: e.into(), id, era: None }
    })?;
    // A legacy session's responses and notifications act as the session's principal, as
    // its requests do (admission narrows those).
    let session_principal = || match headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok()) {
        Some(token) => session::acting_principal(&state.config, principal.clone(), &session::identity(token)),
        None => principal.clone(),
    };
    let request = match message {
        Incoming::Notification(note) => {
            *label = MethodLabel::NOTIFICATION;
            if note.method == mcpgate_protocol::method::notification::CANCELLED {
                Box::pin(forward_cancel(state, headers, &session_principal(), note.params)).await;
            }
            return Ok((reply::accepted(), Record::Now(None)));
        }
        Incoming::Response(response) => {
            *label = MethodLabel::RESPONSE;
            // A 2026-07-28 server sends no requests, so a modern client has nothing to answer.
            let version =
                headers.get(MCP_PROTOCOL_VERSION).and_then(|v| v.to_str().ok()).and_then(ProtocolVersion::parse);
            if version.is_some_and(|v| v.era() == Era::Modern) {
                let reason = "clients must not send responses in 2026-07-28; the server sends no requests".to_owned();
                let error = ProtocolError::InvalidRequest { reason, id: Some(response.id.clone()) };
                return Err(ErrorReply { error: error.into(), id: Some(response.id), era: Some(Era::Modern) });
            }
            // A 2025-11-25 client answering an input request of a task's tasks/result stream.
            // A response that cannot be accepted gets an HTTP error status and an error
            // without an id (it answers no request of the client's).
            if let Err(error) = Box::pin(answer_task_input(state, &session_principal(), &response)).await {
                // A store error anywhere in the chain keeps the store's answer.
                let error = if is_caused_by::<mcpgate_store::StoreError>(&error) {
                    error
                } else {
                    ProtocolError::InvalidRequest { reason: error.to_string(), id: None }.into()
                };
                return Err(ErrorReply { error, id: None, era: Some(Era::Legacy) });
            }
            return Ok((reply::accepted(), Record::Now(Some(Era::Legacy))));
        }
        Incoming::Request(request) => request,
    };
    *label = Method::parse(&request.method).map_or(MethodLabel::UNKNOWN, MethodLabel::method);
    span.record("method", request.method.as_ref());
    let (reply, era) = dispatch(state, endpoint, headers, principal, &request, accept, ticket).await?;
    span.record("era", era.as_str());
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
    if accept.json { reply::json(envelope) } else { reply::sse_once(envelope) }
}

/// Any method but POST (and a legacy session's GET) on the MCP endpoint.
pub(super) async fn not_allowed() -> Response {
    ErrorReply::bare(GatewayError::MethodNotAllowed).into_response()
}

/// `GET /mcp`: a 2025-11-25 session's stream of server notifications (list changes). Without
/// a session id (a 2026-07-28 client, or none at all) the method is not allowed.
pub(super) async fn get_mcp(state: AppState, endpoint: Arc<Endpoint>, uri: Uri, headers: HeaderMap) -> Response {
    if !headers.contains_key(MCP_SESSION_ID) {
        return not_allowed().await;
    }
    let opened = async {
        state.origin.check(&headers, &uri)?;
        let principal = authenticate(&state, &endpoint, &headers).await?;
        if !Accept::from_headers(&headers)?.sse {
            return Err(GatewayError::NotAcceptable);
        }
        crate::mcp::listen::open_legacy(&state, &endpoint, &headers, &principal)
    };
    match opened.await {
        Ok(response) => response,
        Err(error) => ErrorReply { error, id: None, era: Some(Era::Legacy) }.into_response(),
    }
}

/// Authenticates a request to `endpoint`: a 401 points at its own protected resource
/// metadata.
async fn authenticate(
    state: &AppState,
    endpoint: &Endpoint,
    headers: &HeaderMap,
) -> Result<mcpgate_runtime::Principal, GatewayError> {
    let server = endpoint.server().and(endpoint.resource());
    state.auth.authenticate_for(headers, server).await.map_err(|e| endpoint.challenge(state.endpoints.root(), e))
}

/// Publishes a 2025-11-25 session's `notifications/cancelled` to whichever replica runs the
/// request it names (see `mcp::cancellation`); best effort, as cancellation is advisory.
async fn forward_cancel(
    state: &AppState,
    headers: &HeaderMap,
    principal: &mcpgate_runtime::Principal,
    params: Option<&serde_json::value::RawValue>,
) {
    let Some(session) = headers.get(MCP_SESSION_ID).and_then(|v| v.to_str().ok()) else { return };
    let Some(request) = crate::mcp::cancellation::cancelled_request(params) else { return };
    let session = session::identity(session);
    let channel = crate::mcp::cancellation::channel(principal, &session, &request);
    let event = mcpgate_store::TaskEvent::Status(mcpgate_protocol::task::TaskStatus::Cancelled);
    if let Err(e) = mcpgate_store::EventBus::publish(&state.store, &channel, event).await {
        tracing::warn!(error = &e as &dyn std::error::Error, "could not forward a client's cancellation");
    }
}
