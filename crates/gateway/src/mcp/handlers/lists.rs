//! `tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`: pre-rendered;
//! `tools/list` rendered for the caller when some of their tools are theirs alone.

use bytes::Bytes;

use mcpgate_protocol::Method;
use mcpgate_protocol::pagination::PaginatedParams;

use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::state::AppState;

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
    let lists = catalog.lists(cx.era);
    Ok(match method {
        Method::PromptsList => lists.prompts.clone(),
        Method::ResourcesList => lists.resources.clone(),
        Method::ResourcesTemplatesList => lists.templates.clone(),
        _ => catalog
            .tools_list(cx.era, &cx.principal)
            .await
            .map_err(|e| GatewayError::internal(format!("rendering a tools list: {e}")))?,
    })
}
