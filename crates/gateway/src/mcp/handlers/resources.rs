//! `resources/read`.

use mcpgate_protocol::Era;
use mcpgate_protocol::resource::ReadResourceParams;

use super::invoke::prepare;
use crate::error::GatewayError;
use crate::mcp::context::CallContext;
use crate::mcp::dispatch::Prepared;
use crate::mcp::request_state::{Mode, Round, Target};
use crate::state::AppState;
use mcpgate_runtime::catalog::{Failure, Outcome};

/// Prepares a read (after opening an echoed requestState); the first handler (in
/// registration order) that serves the URI reads it.
pub(in crate::mcp) async fn read_resource(
    state: &AppState,
    cx: &CallContext,
    params: ReadResourceParams,
) -> Result<Prepared, GatewayError> {
    let target = Target::new(cx, &params.uri, &mcpgate_protocol::JsonObject::new(), Mode::Now)?;
    let mut round = Round::resume(state, cx, target, params.request_state.as_deref(), params.input_responses.as_ref())?;
    round.commit(state).await?;
    let uri = params.uri;
    let catalog_state = state.clone();
    let modern = cx.era == Era::Modern;
    Ok(prepare(state, cx, round, move |tcx| {
        Box::pin(async move {
            let catalog = catalog_state.catalog.load();
            let Some(read) = catalog.resources().iter().find_map(|h| h.read(&uri, &tcx)) else {
                return Outcome::Failed(Failure::ResourceNotFound(uri.clone()));
            };
            match read.await {
                Outcome::Complete(mut result) if modern => {
                    // Cache hints are required on modern results: default to "do not cache", and
                    // never let a shared cache serve what sits behind authentication.
                    result.ttl_ms.get_or_insert(0);
                    result.cache_scope = Some(catalog_state.cache_scope_for(result.cache_scope));
                    Outcome::Complete(result)
                }
                Outcome::Complete(mut result) => {
                    result.ttl_ms = None;
                    result.cache_scope = None;
                    Outcome::Complete(result)
                }
                other => other,
            }
        })
    }))
}
