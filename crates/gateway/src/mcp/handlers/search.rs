//! `discovery = "search"` on a virtual server: its `tools/list` holds only `search_tools` and
//! `call_tool`; `search_tools` answers, ranked, from the tools this caller would see in the
//! server's full list; `call_tool` is unwrapped into the call it names, which then takes the
//! normal path, so selection, policy, rate limits, tasks and the audit trail all judge the
//! tool it calls, not the wrapper.
//!
//! Invariants: a search shows exactly what a filtered `tools/list` of this endpoint would show
//! the caller (see [`super::lists::visible`]); on a search server the two names always mean
//! these tools (an upstream tool exposed under either is neither found nor called there).

use bytes::Bytes;

use mcpgate_protocol::tool::{CallToolParams, CallToolResult};
use mcpgate_runtime::catalog::Failure;
use mcpgate_runtime::catalog::search::{self, CallRequest, SearchRequest};

use super::lists::visible;
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::mcp::render;
use crate::policy::Item;
use crate::state::AppState;
use crate::tasks;

/// Whether `params` calls `search_tools` of a search server.
pub(in crate::mcp) fn is_search(cx: &CallContext, params: &CallToolParams) -> bool {
    cx.endpoint.searches() && params.name == search::SEARCH_TOOLS
}

/// The call a search server's `call_tool` names, in place of the wrapper (its task
/// augmentation, requestState and answers stay the wrapper's: they belong to this call); any
/// other call as it is. `Ok(true)` when it was unwrapped.
pub(in crate::mcp) fn unwrap(cx: &CallContext, params: &mut CallToolParams) -> Result<bool, GatewayError> {
    if !cx.endpoint.searches() || params.name != search::CALL_TOOL {
        return Ok(false);
    }
    let CallRequest { name, arguments } = CallRequest::parse(params.arguments.take())?;
    params.name = name;
    params.arguments = arguments;
    Ok(true)
}

/// Answers `search_tools`: charged like a call of the gateway's own tools, then ranked over
/// what the caller may see here.
pub(in crate::mcp) async fn search(
    state: &AppState,
    cx: &CallContext,
    params: &CallToolParams,
) -> Result<Bytes, GatewayError> {
    // Arguments it refuses are a result the model reads (SEP-1303), as for any tool.
    let SearchRequest { query, limit } = match SearchRequest::parse(params.arguments.as_ref()) {
        Ok(request) => request,
        Err(Failure::InvalidArguments(message)) => return render::complete(cx, CallToolResult::error(message)),
        Err(failure) => return Err(failure.into()),
    };
    state.limits.admit(&cx.principal, tasks::call_charge(None, false)).await?;
    let catalog = state.catalog.load();
    let caller = cx.endpoint.caller(&cx.principal);
    let shows = |name: &str, upstream: Option<&str>| visible(cx, &caller, Item::Tool(name), upstream);
    let found = catalog.search_where(cx.era, &cx.principal, &query, limit, &shows).await;
    let result =
        search::search_result(&found).map_err(|e| GatewayError::internal_caused("rendering search results", e))?;
    render::complete(cx, result)
}
