//! Dispatch: method name → admission with the method's params type → handler, and the choice
//! between a JSON response and an SSE stream (made up front, or, for a 2025-11-25 session's
//! `tools/call` that accepts both, when its first message is ready: the result alone is JSON,
//! an error alone is answered with its own HTTP status, a question to the client first makes
//! it a stream).
//!
//! Invariants: a streamed call runs in its own task that owns everything it needs (including
//! the request's concurrency permit), stops when the client closes the stream or the replica
//! shuts down, and records its own metrics when it ends; its concurrency slot is released
//! before the final send, so a client that stops reading holds no slot, and that send is
//! bounded in time. A request that reaches a tool, prompt or resource is audited exactly once,
//! when it ends: here for an answer given at once, by the stream's task for a streamed one.

use std::sync::Arc;
use std::time::Duration;

use axum::http::HeaderMap;
use axum::response::IntoResponse as _;
use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;

use mcpgate_protocol::jsonrpc::Request;
use mcpgate_protocol::pagination::MetaParams;
use mcpgate_protocol::{Era, Method};

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{EventBus as _, TaskEvent};

use super::admission::admit;
use super::cancellation;
use super::handlers;
use super::resource_uri;
use super::tool_lookup::ToolLookup;
use super::work::{Prepared, Reply};
use crate::audit::RequestAudit;
use crate::call_context::CallContext;
use crate::error::{ErrorReply, GatewayError, clip};
use crate::http::negotiate::Accept;
use crate::http::reply::{self, Frame};
use crate::metrics::{InFlight, MethodLabel, Outcome};
use crate::servers::Endpoint;
use crate::state::AppState;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{Notifier, UriTemplate};

/// How long a 2025-11-25 call that answers JSON unless it asks for input runs before it
/// listens for its client's cross-replica `notifications/cancelled`.
const CANCEL_SUBSCRIBE_AFTER: Duration = Duration::from_millis(200);

/// How long a finished streamed call waits for a slow client to take its final message.
const FINAL_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// What a request holds while it runs: its concurrency slot and its in-flight mark.
#[derive(Debug)]
pub(crate) struct Ticket {
    /// Released when the request (or its stream's work) ends; `None` for waits that do not
    /// count as requests in flight (legacy `tasks/result`).
    pub permit: Option<OwnedSemaphorePermit>,
    /// Decrements the in-flight gauge when dropped.
    pub in_flight: InFlight,
    /// When the request arrived.
    pub started: Instant,
}

/// Routes one request; returns the reply and the era it was served in.
pub(crate) async fn dispatch(
    state: &AppState,
    endpoint: &Arc<Endpoint>,
    headers: &HeaderMap,
    principal: Principal,
    request: &Request<'_>,
    accept: Accept,
    ticket: Ticket,
) -> Result<(Reply, Era), ErrorReply> {
    let mut audit = None;
    let routed = route(state, endpoint, headers, principal, request, accept, ticket, &mut audit).await;
    // Still here unless a stream took it (and audits the request when it ends).
    if let Some(audit) = audit {
        match &routed {
            Ok((Reply::Result(result), _)) => audit.result(result),
            Ok(_) => audit.cancelled(),
            Err(reply) => audit.error(&reply.error),
        }
    }
    routed
}

/// Opens the audit of an admitted request that reaches a tool, prompt or resource (`None`
/// with the trail off): `name` is the tool or prompt name or the resource URI; `arguments`
/// are taken only with `audit.include_arguments`. A tool is found through `tool`, the
/// request's one look-up of it, which the policy and the call then share.
async fn open_audit(
    state: &AppState,
    cx: &CallContext,
    name: &str,
    tool: Option<&mut ToolLookup>,
    arguments: impl FnOnce() -> Option<mcpgate_protocol::JsonObject>,
) -> Option<RequestAudit> {
    if !state.audit.is_enabled() {
        return None;
    }
    let catalog = state.catalog.load();
    let upstream: Option<String> = match (cx.method, tool) {
        (Method::ToolsCall, Some(tool)) => tool
            .find(&catalog, name, &cx.principal)
            .await
            .and_then(|(tool, _)| tool.descriptor().upstream.as_deref().map(str::to_owned)),
        (Method::PromptsGet, _) => catalog.prompt(name).and_then(|p| p.upstream().map(str::to_owned)),
        (Method::ResourcesRead, _) => catalog
            .resources()
            .iter()
            .find_map(|handler| {
                let serves = handler.resource().is_some_and(|r| r.uri == name)
                    || handler
                        .template()
                        .and_then(|t| UriTemplate::parse(&t.uri_template))
                        .is_some_and(|t| t.matches(name).is_some());
                serves.then(|| handler.upstream().map(str::to_owned))
            })
            // A URI nothing serves is audited too (its read fails): with no upstream.
            .flatten(),
        _ => None,
    };
    // Allowed unless it ends with the policy's denial (`RequestAudit::error` records the rule).
    state.audit.request(cx, name, upstream.as_deref(), arguments)
}

/// [`dispatch`], leaving in `audit` the audit of a request that reaches a tool, prompt or
/// resource (unless a stream took it over).
///
/// Each method's handler future is boxed where it is awaited: unboxed, this future would be
/// as large as the largest of them (tens of KiB, doubled at every enclosing `async fn`) and
/// be copied whole at each level on every request, whichever method it serves.
#[allow(clippy::too_many_arguments)] // one request's parts, passed once
async fn route(
    state: &AppState,
    endpoint: &Arc<Endpoint>,
    headers: &HeaderMap,
    principal: Principal,
    request: &Request<'_>,
    accept: Accept,
    mut ticket: Ticket,
    audit: &mut Option<RequestAudit>,
) -> Result<(Reply, Era), ErrorReply> {
    let method = Method::parse(&request.method);
    macro_rules! admitted {
        ($params:ty) => {
            admit::<$params>(state, endpoint, headers, principal, request, method)?
        };
    }
    let fail = |cx: &CallContext| {
        let (id, era) = (cx.id.clone(), cx.era);
        move |error: GatewayError| ErrorReply { error, id: Some(id), era: Some(era) }
    };
    let simple = |cx: CallContext, result: Result<Bytes, GatewayError>| match result {
        Ok(bytes) => Ok((Reply::Result(bytes), cx.era)),
        Err(e) => Err(fail(&cx)(e)),
    };
    let (cx, prepared, streaming) = match method {
        Some(Method::Initialize) => {
            let (cx, params) = admitted!(mcpgate_protocol::initialize::InitializeParams);
            return handlers::initialize(state, &cx, params).map(|r| (r, cx.era)).map_err(fail(&cx));
        }
        Some(Method::Ping) => {
            let (cx, _) = admitted!(MetaParams);
            let result = handlers::ping(&cx);
            return simple(cx, result);
        }
        Some(Method::ServerDiscover) => {
            let (cx, _) = admitted!(MetaParams);
            return Ok((Reply::Result(cx.endpoint.discover()), cx.era));
        }
        Some(
            m @ (Method::ToolsList | Method::PromptsList | Method::ResourcesList | Method::ResourcesTemplatesList),
        ) => {
            let (cx, params) = admitted!(mcpgate_protocol::pagination::PaginatedParams);
            let result = Box::pin(handlers::list(state, &cx, m, &params)).await;
            return simple(cx, result);
        }
        Some(Method::CompletionComplete) => {
            let (cx, params) = admitted!(mcpgate_protocol::completion::CompleteParams);
            let result = handlers::complete(state, &cx, &params);
            return simple(cx, result);
        }
        Some(Method::ToolsCall) => {
            let (cx, mut params) = admitted!(mcpgate_protocol::tool::CallToolParams);
            // A search server's `call_tool` is audited, judged and run as the call it names.
            let wrapped = match handlers::search::unwrap(&cx, &mut params) {
                Ok(wrapped) => wrapped,
                Err(error) => {
                    *audit = open_audit(state, &cx, &params.name, Some(&mut ToolLookup::new()), || None).await;
                    return Err(fail(&cx)(error));
                }
            };
            // Found once (a caller's own oauth tool: with the one read of their connection),
            // for the audit, the policy and the call.
            let mut tool = ToolLookup::new();
            *audit = open_audit(state, &cx, &params.name, Some(&mut tool), || params.arguments.clone()).await;
            if handlers::search::is_search(&cx, &params) {
                let result = Box::pin(handlers::search::search(state, &cx, &params)).await;
                return simple(cx, result);
            }
            let streaming = accept.sse && (cx.progress_token.is_some() || cx.log_level.is_some());
            let plan = Box::pin(handlers::call_tool(state, headers, &cx, params, wrapped, tool));
            match plan.await.map_err(fail(&cx))? {
                handlers::ToolPlan::Run(prepared) => (cx, prepared, streaming),
                handlers::ToolPlan::Task(plan) => {
                    let result = Box::pin(handlers::task_methods::create(state, &cx, plan)).await;
                    return simple(cx, result);
                }
                handlers::ToolPlan::Ask(result) => return simple(cx, Ok(result)),
            }
        }
        Some(Method::TasksGet) => {
            let (cx, params) = admitted!(mcpgate_protocol::task::TaskIdParams);
            let result = Box::pin(handlers::task_methods::get(state, &cx, &params)).await;
            return simple(cx, result);
        }
        Some(Method::TasksCancel) => {
            let (cx, params) = admitted!(mcpgate_protocol::task::TaskIdParams);
            let result = Box::pin(handlers::task_methods::cancel(state, &cx, &params)).await;
            return simple(cx, result);
        }
        Some(Method::TasksUpdate) => {
            let (cx, params) = admitted!(mcpgate_protocol::task::UpdateTaskParams);
            let result = Box::pin(handlers::task_methods::update(state, &cx, &params)).await;
            return simple(cx, result);
        }
        Some(Method::TasksList) => {
            let (cx, params) = admitted!(mcpgate_protocol::pagination::PaginatedParams);
            let result = Box::pin(handlers::task_methods::list(state, &cx, &params)).await;
            return simple(cx, result);
        }
        Some(Method::TasksResult) => {
            let (cx, params) = admitted!(mcpgate_protocol::task::TaskIdParams);
            let prepared = handlers::task_methods::result(state, &cx, params).map_err(fail(&cx))?;
            // A waiter is not a request in flight; it counts against its own limit.
            ticket.permit = None;
            (cx, prepared, accept.sse)
        }
        Some(Method::SubscriptionsListen) => {
            let (cx, params) = admitted!(mcpgate_protocol::subscription::ListenParams);
            let response = Box::pin(super::listen::open(state, &cx, params, accept)).await.map_err(fail(&cx))?;
            // A listener is not a request in flight: it holds a listener slot instead, and
            // counts as served once its stream is open.
            let Ticket { permit, in_flight, started } = ticket;
            drop((permit, in_flight));
            state.metrics.record(MethodLabel::method(cx.method), Some(cx.era), Outcome::Ok, started.elapsed());
            return Ok((Reply::Stream(response), cx.era));
        }
        Some(Method::PromptsGet) => {
            let (cx, params) = admitted!(mcpgate_protocol::prompt::GetPromptParams);
            let arguments = || {
                let strings = params.arguments.as_ref()?.iter();
                Some(strings.map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone()))).collect())
            };
            *audit = open_audit(state, &cx, &params.name, None, arguments).await;
            let prepared = Box::pin(handlers::get_prompt(state, &cx, params)).await.map_err(fail(&cx))?;
            (cx, prepared, false)
        }
        Some(Method::ResourcesRead) => {
            let (cx, mut params) = admitted!(mcpgate_protocol::resource::ReadResourceParams);
            // Audited, judged, selected and read by its normal form; a URI refused there is
            // audited as sent.
            let normal = resource_uri::normalize(&params.uri);
            if let Ok(uri) = &normal {
                params.uri.clone_from(uri);
            }
            *audit = open_audit(state, &cx, &params.uri, None, || None).await;
            normal.map_err(fail(&cx))?;
            let prepared = Box::pin(handlers::read_resource(state, &cx, params)).await.map_err(fail(&cx))?;
            (cx, prepared, false)
        }
        // Unknown methods: era rules first, then "not found".
        _ => {
            let (cx, _) = admitted!(MetaParams);
            return Err(fail(&cx)(GatewayError::MethodNotFound { method: clip(&request.method) }));
        }
    };
    let era = cx.era;
    // A 2025-11-25 session's call that may need input answers with JSON unless it does send
    // the client something first (its input requests): then the answer is an SSE stream.
    let lazy = era == Era::Legacy && cx.method == Method::ToolsCall && accept.sse && cx.session.is_some();
    if !streaming && accept.json && !lazy {
        let result = prepared(Notifier::default(), state.shutdown.child_token()).await.map_err(fail(&cx))?;
        return Ok((Reply::Result(result), era));
    }
    let keepalive = state.sse_keepalive();
    let id = cx.id.clone();
    let eager = streaming || !accept.json;
    let (error_tx, mut error_rx) = tokio::sync::oneshot::channel();
    let (mut rx, guard) = spawn_stream(state, cx, ticket, prepared, (!eager).then_some(error_tx), audit.take());
    if eager {
        return Ok((Reply::Stream(reply::sse(rx, None, guard, keepalive)), era));
    }
    // Dropping `guard` (here when the client leaves, or with the response) cancels the work.
    let response = match rx.recv().await {
        // Nothing was sent before the error: it is answered like any, with its own HTTP status
        // (say, 429 for a call refused as a task).
        Some(Frame::Final(envelope)) => match error_rx.try_recv() {
            Ok(error) => ErrorReply { error, id: Some(id), era: Some(era) }.into_response(),
            Err(_) => reply::json(envelope),
        },
        Some(first) => reply::sse(rx, Some(first), guard, keepalive),
        // The work ended without a word (it cannot, while we wait): say so rather than hang.
        None => {
            let error = GatewayError::internal("the call ended without an answer");
            reply::json(reply::error_envelope(&id, &error, Some(era)))
        }
    };
    Ok((Reply::Stream(response), era))
}

/// Runs a call in a task feeding an SSE stream; returns the stream's frames and the guard that
/// cancels the work when dropped. A lazy call (JSON unless it sends something first) is given
/// `lazy_error`, where its error goes (before its final frame) should it fail.
fn spawn_stream(
    state: &AppState,
    cx: CallContext,
    ticket: Ticket,
    prepared: Prepared,
    lazy_error: Option<tokio::sync::oneshot::Sender<GatewayError>>,
    audit: Option<RequestAudit>,
) -> (mpsc::Receiver<Frame>, tokio_util::sync::DropGuard) {
    let lazy = lazy_error.is_some();
    let (tx, rx) = mpsc::channel::<Frame>(32);
    let cancel = state.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let work = prepared(Notifier::new(tx.clone()), cancel.clone());
    let shutdown = state.shutdown.clone();
    let metrics = state.metrics.clone();
    // A 2025-11-25 tools/call can be cancelled by a notification landing on any replica.
    let cancel_channel = match (cx.era, cx.method, &cx.session) {
        (Era::Legacy, Method::ToolsCall, Some(session)) => Some(cancellation::channel(&cx.principal, session, &cx.id)),
        _ => None,
    };
    let store = state.store.clone();
    let task = async move {
        let Ticket { permit, in_flight, started } = ticket;
        // Subscribed beside the work, not before it: the call does not wait a round trip for
        // a cancellation that is best effort anyway.
        let cancelled_by_client = async {
            let Some(channel) = cancel_channel else { return std::future::pending().await };
            // A call that may stay plain JSON is usually over before a client would cancel it:
            // most such calls cost no subscription.
            if lazy {
                tokio::time::sleep(CANCEL_SUBSCRIBE_AFTER).await;
            }
            match store.subscribe(&channel).await {
                Ok(mut sub) => while sub.next().await != TaskEvent::Status(TaskStatus::Cancelled) {},
                Err(e) => {
                    tracing::debug!(
                        error = &e as &dyn std::error::Error,
                        "no cross-replica cancellation for this call"
                    );
                    std::future::pending::<()>().await;
                }
            }
        };
        // Cancellation first: a tool that returns because it saw the token has not finished.
        let outcome = tokio::select! {
            biased;
            () = cancel.cancelled() => None,
            () = cancelled_by_client => {
                tracing::debug!(id = %cx.id, "cancelled by the client's notification");
                cancel.cancel();
                None
            }
            result = work => Some(result),
        };
        if let Some(audit) = audit {
            match &outcome {
                Some(Ok(result)) => audit.result(result),
                Some(Err(e)) => audit.error(e),
                None => audit.cancelled(),
            }
        }
        let (message, recorded) = match outcome {
            Some(Ok(result)) => (Some(reply::result_envelope(&cx.id, &result)), Outcome::Ok),
            Some(Err(e)) => {
                let kind = if e.is_server_fault() { Outcome::ServerError } else { Outcome::ClientError };
                if e.is_server_fault() {
                    tracing::error!(
                        error = &e as &dyn std::error::Error,
                        detail = e.log_detail(),
                        "streamed request failed"
                    );
                }
                let envelope = reply::error_envelope(&cx.id, &e, Some(cx.era));
                if let Some(to) = lazy_error {
                    let _ = to.send(e);
                }
                (Some(envelope), kind)
            }
            None if shutdown.is_cancelled() => {
                tracing::warn!(id = %cx.id, "streamed request cut off by shutdown");
                (Some(reply::error_envelope(&cx.id, &GatewayError::ShuttingDown, Some(cx.era))), Outcome::ServerError)
            }
            None => {
                tracing::debug!(id = %cx.id, "stream closed by the client; work cancelled");
                (None, Outcome::ClientError)
            }
        };
        metrics.record(MethodLabel::method(cx.method), Some(cx.era), recorded, started.elapsed());
        drop((permit, in_flight));
        if let Some(message) = message
            && tokio::time::timeout(FINAL_SEND_TIMEOUT, tx.send(Frame::Final(message))).await.is_err()
        {
            tracing::debug!(id = %cx.id, "client did not read the final message in time");
        }
    };
    state.in_flight.spawn(tracing::Instrument::in_current_span(task));
    (rx, guard)
}
