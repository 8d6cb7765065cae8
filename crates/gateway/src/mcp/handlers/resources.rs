//! `resources/read`.

use tokio_util::sync::CancellationToken;

use mcpgate_protocol::resource::ReadResourceParams;
use mcpgate_protocol::result::CacheScope;

use super::invoke::{finish, tool_context};
use crate::catalog::{Notifier, Outcome};
use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Work;
use crate::state::AppState;

/// Finds the handler serving the URI (first match in registration order) and returns the work.
pub(in crate::mcp) fn read_resource(
    state: &AppState,
    cx: &CallContext,
    params: ReadResourceParams,
) -> Result<impl FnOnce(Notifier, CancellationToken) -> Work + use<>, GatewayError> {
    if params.request_state.is_some() {
        return Err(GatewayError::invalid_params("invalid requestState"));
    }
    let state = state.clone();
    let cx = cx.clone();
    let uri = params.uri;
    Ok(move |notifier, cancel| -> Work {
        Box::pin(async move {
            let tcx = tool_context(&cx, notifier, cancel);
            let Some(read) = state.catalog.resources().iter().find_map(|h| h.read(&uri, &tcx)) else {
                return Err(GatewayError::ResourceNotFound { uri });
            };
            let read = async move {
                match read.await {
                    // Cache hints are required on modern results; default to "do not share".
                    Outcome::Complete(mut result) => {
                        result.ttl_ms.get_or_insert(0);
                        result.cache_scope.get_or_insert(CacheScope::Private);
                        if cx.era == mcpgate_protocol::Era::Legacy {
                            result.ttl_ms = None;
                            result.cache_scope = None;
                        }
                        Outcome::Complete(result)
                    }
                    other => other,
                }
            };
            finish(&state, &cx, read).await
        })
    })
}
