//! What a handler hands back to the dispatcher: a reply, or work to run after it returns
//! (inline, or in a streaming task that outlives the handler: progress, input requests, a
//! legacy `tasks/result` wait).
//!
//! Invariant: work owns everything it touches (`'static`), so the dispatcher may run it
//! wherever the reply needs it; it learns of the client leaving through its cancellation token.

use std::future::Future;
use std::pin::Pin;

use axum::response::Response;
use bytes::Bytes;
use tokio_util::sync::CancellationToken;

use mcpgate_runtime::catalog::Notifier;

use crate::error::GatewayError;

/// A handler's work, once started with a notifier and a cancellation token.
pub(super) type Work = Pin<Box<dyn Future<Output = Result<Bytes, GatewayError>> + Send + 'static>>;
/// A validated call, ready to run inline or in a streaming task.
pub(super) type Prepared = Box<dyn FnOnce(Notifier, CancellationToken) -> Work + Send + 'static>;

/// What a handled request answers with.
#[derive(Debug)]
pub(crate) enum Reply {
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
