//! Dispatch: method name → admission with the method's params type → handler, and the choice
//! between a JSON response and an SSE stream.
//!
//! Invariant: a streamed call runs in its own task that owns everything it needs (including
//! the request's concurrency permit), stops when the client closes the stream or the replica
//! shuts down, and records its own metrics when it ends.

use std::future::Future;
use std::pin::Pin;

use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::jsonrpc::Request;
use mcpgate_protocol::pagination::MetaParams;
use mcpgate_protocol::{Era, Method};

use super::admission::admit;
use super::context::CallContext;
use super::handlers;
use crate::auth::Principal;
use crate::catalog::Notifier;
use crate::error::{ErrorReply, GatewayError};
use crate::http::negotiate::Accept;
use crate::http::reply;
use crate::metrics::{InFlight, MethodLabel, Outcome};
use crate::state::AppState;

/// What a handled request answers with.
#[derive(Debug)]
pub enum Reply {
    /// A serialized result, to be wrapped in the response envelope.
    Result(Bytes),
    /// A result plus a freshly minted legacy session id.
    Initialized {
        /// The serialized `InitializeResult`.
        result: Bytes,
        /// The sealed session id for the `Mcp-Session-Id` header.
        session_id: String,
    },
    /// A streamed response; its task records metrics itself.
    Stream(Response),
}

/// What a request holds while it runs: its concurrency slot and its in-flight mark.
#[derive(Debug)]
pub struct Ticket {
    /// Released when the request (or its stream) ends.
    pub permit: OwnedSemaphorePermit,
    /// Decrements the in-flight gauge when dropped.
    pub in_flight: InFlight,
    /// When the request arrived.
    pub started: Instant,
}

/// A handler's work, built for a given notifier and cancellation token.
pub(super) type Work = Pin<Box<dyn Future<Output = Result<Bytes, GatewayError>> + Send + 'static>>;

/// Routes one request.
pub async fn dispatch(
    state: &AppState,
    headers: &HeaderMap,
    principal: Principal,
    request: &Request<'_>,
    accept: Accept,
    ticket: Ticket,
) -> Result<(Reply, Era), ErrorReply> {
    let method = Method::parse(&request.method);
    macro_rules! admitted {
        ($params:ty) => {
            admit::<$params>(state, headers, principal, request, method)?
        };
    }
    let with_id = |cx: &CallContext| {
        let id = cx.id.clone();
        let era = cx.era;
        move |error: GatewayError| ErrorReply { error, id: Some(id.clone()), era: Some(era) }
    };
    match method {
        Some(Method::Initialize) => {
            let (cx, params) = admitted!(mcpgate_protocol::initialize::InitializeParams);
            handlers::initialize(state, &cx, params).map(|r| (r, cx.era)).map_err(with_id(&cx))
        }
        Some(Method::Ping) => {
            let (cx, _) = admitted!(MetaParams);
            handlers::ping(state, &cx).map(|r| (Reply::Result(r), cx.era)).map_err(with_id(&cx))
        }
        Some(Method::ServerDiscover) => {
            let (cx, _) = admitted!(MetaParams);
            Ok((Reply::Result(state.discover.clone()), cx.era))
        }
        Some(
            m @ (Method::ToolsList | Method::PromptsList | Method::ResourcesList | Method::ResourcesTemplatesList),
        ) => {
            let (cx, params) = admitted!(mcpgate_protocol::pagination::PaginatedParams);
            handlers::list(state, &cx, m, &params).map(|r| (Reply::Result(r), cx.era)).map_err(with_id(&cx))
        }
        Some(Method::ToolsCall) => {
            let (cx, params) = admitted!(mcpgate_protocol::tool::CallToolParams);
            let fail = with_id(&cx);
            let streaming = wants_stream(&cx, accept);
            let work = handlers::call_tool(state, headers, &cx, params).map_err(&fail)?;
            let era = cx.era;
            Ok((respond(state, cx, streaming, accept, ticket, work).await.map_err(fail)?, era))
        }
        Some(Method::PromptsGet) => {
            let (cx, params) = admitted!(mcpgate_protocol::prompt::GetPromptParams);
            let fail = with_id(&cx);
            let work = handlers::get_prompt(state, &cx, params).map_err(&fail)?;
            let era = cx.era;
            Ok((respond(state, cx, false, accept, ticket, work).await.map_err(fail)?, era))
        }
        Some(Method::ResourcesRead) => {
            let (cx, params) = admitted!(mcpgate_protocol::resource::ReadResourceParams);
            let fail = with_id(&cx);
            let work = handlers::read_resource(state, &cx, params).map_err(&fail)?;
            let era = cx.era;
            Ok((respond(state, cx, false, accept, ticket, work).await.map_err(fail)?, era))
        }
        Some(Method::CompletionComplete) => {
            let (cx, params) = admitted!(mcpgate_protocol::completion::CompleteParams);
            handlers::complete(state, &cx, &params).map(|r| (Reply::Result(r), cx.era)).map_err(with_id(&cx))
        }
        // Tasks are not served yet, and unknown methods: era rules first, then "not found".
        _ => {
            let (cx, _) = admitted!(MetaParams);
            let name: String = request.method.chars().take(100).collect();
            Err(with_id(&cx)(GatewayError::MethodNotFound { method: name }))
        }
    }
}

/// Whether a call's notifications should stream: the request opted into progress or logs and
/// the client accepts SSE.
fn wants_stream(cx: &CallContext, accept: Accept) -> bool {
    accept.sse && (cx.progress_token.is_some() || cx.log_level.is_some())
}

/// Runs `work` inline (JSON response) or in a task feeding an SSE stream.
async fn respond(
    state: &AppState,
    cx: CallContext,
    streaming: bool,
    accept: Accept,
    ticket: Ticket,
    work: impl FnOnce(Notifier, CancellationToken) -> Work,
) -> Result<Reply, GatewayError> {
    if !streaming && accept.json {
        let result = work(Notifier::default(), state.shutdown.child_token()).await?;
        return Ok(Reply::Result(result));
    }
    let (tx, rx) = mpsc::channel::<Bytes>(32);
    let cancel = state.shutdown.child_token();
    let guard = cancel.clone().drop_guard();
    let future = work(Notifier::new(tx.clone()), cancel.clone());
    let metrics = state.metrics.clone();
    state.tasks.spawn(async move {
        let Ticket { permit, in_flight, started } = ticket;
        let outcome = tokio::select! {
            r = future => Some(r),
            () = cancel.cancelled() => None,
        };
        let (message, result) = match outcome {
            Some(Ok(result)) => (reply::result_envelope(&cx.id, &result), Outcome::Ok),
            Some(Err(e)) => {
                let kind = if e.is_server_fault() { Outcome::ServerError } else { Outcome::ClientError };
                if e.is_server_fault() {
                    tracing::error!(error = ?e, "streamed request failed");
                }
                (reply::error_envelope(&cx.id, &e, Some(cx.era)), kind)
            }
            None => {
                tracing::debug!(id = %cx.id, "stream closed by the client; work cancelled");
                (Bytes::new(), Outcome::ClientError)
            }
        };
        if !message.is_empty() {
            let _ = tx.send(message).await;
        }
        metrics.record(MethodLabel::method(cx.method), Some(cx.era), result, started.elapsed());
        drop((permit, in_flight));
    });
    Ok(Reply::Stream(reply::sse(rx, guard, state.sse_keepalive())))
}
