//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`: pre-rendered;
//! `tools/list` rendered for the caller when some of their tools are theirs alone, and every
//! list rendered for the caller when the endpoint's policy has rules (a caller never sees what
//! it may not use) or the endpoint is a virtual server (it lists only its selection).

use bytes::Bytes;

use mcpgate_protocol::Method;
use mcpgate_protocol::pagination::PaginatedParams;

use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::policy::{Arguments, Caller, Item, Use};
use crate::state::AppState;
use mcpgate_runtime::catalog::Catalog;

/// Serves a list. The lists fit one page, so no cursor is ever handed out and any cursor a
/// client sends is invalid.
pub(in crate::mcp) async fn list(
    state: &AppState,
    cx: &CallContext,
    method: Method,
    params: &PaginatedParams,
) -> Result<Bytes, GatewayError> {
    if params.cursor.is_some() {
        return Err(GatewayError::invalid_params("invalid cursor"));
    }
    let catalog = state.catalog.load();
    // A search server lists its two tools; the rest is found through `search_tools`.
    if method == Method::ToolsList && cx.endpoint.searches() {
        return catalog
            .search_tools_list(cx.era)
            .map_err(|e| GatewayError::internal_caused("rendering a tools list", e));
    }
    if !cx.endpoint.selects_all() || !cx.endpoint.policy_is_open() {
        return filtered(cx, method, &catalog).await;
    }
    let lists = catalog.lists(cx.era);
    Ok(match method {
        Method::PromptsList => lists.prompts.clone(),
        Method::ResourcesList => lists.resources.clone(),
        Method::ResourcesTemplatesList => lists.templates.clone(),
        _ => catalog
            .tools_list(cx.era, &cx.principal)
            .await
            .map_err(|e| GatewayError::internal_caused("rendering a tools list", e))?,
    })
}

/// A list with only the entries of the endpoint's selection that its policy lets the caller
/// use (each judged as its use would be, without arguments), rendered for this caller.
async fn filtered(cx: &CallContext, method: Method, catalog: &Catalog) -> Result<Bytes, GatewayError> {
    let caller = cx.endpoint.caller(&cx.principal);
    let shows = |item: Item<'_>, upstream: Option<&str>| visible(cx, &caller, item, upstream);
    let rendered = match method {
        Method::PromptsList => catalog.prompts_list_where(cx.era, &|name, up| shows(Item::Prompt(name), up)),
        Method::ResourcesList => catalog.resources_list_where(cx.era, &|uri, up| shows(Item::Resource(uri), up)),
        Method::ResourcesTemplatesList => {
            catalog.templates_list_where(cx.era, &|template, up| shows(Item::Resource(template), up))
        }
        _ => catalog.tools_list_where(cx.era, &cx.principal, &|name, up| shows(Item::Tool(name), up)).await,
    };
    rendered.map_err(|e| GatewayError::internal_caused("rendering a list", e))
}

/// Whether the endpoint's lists show `item` to `caller`: in its selection, and allowed by its
/// policy as its use would be, without arguments.
pub(super) fn visible(cx: &CallContext, caller: &Caller<'_>, item: Item<'_>, upstream: Option<&str>) -> bool {
    let endpoint = &cx.endpoint;
    let selected = match item {
        Item::Tool(name) => endpoint.selects_tool(name),
        Item::Prompt(name) => endpoint.selects_prompt(name),
        Item::Resource(uri) => endpoint.selects_resource(uri),
    };
    selected && endpoint.shows(caller, Use { target: item, upstream, arguments: Arguments::None })
}
