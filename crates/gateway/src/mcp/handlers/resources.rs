//! `resources/read`: the first handler (in registration order) that serves the URI reads it; a
//! resource of an upstream is counted against the upstream's rate limits, like a call of its
//! tools. The URI arrives in its normal form (`mcp::resource_uri`, applied by dispatch before
//! the read is audited): the audit, selection, policy, the handler and the upstream all see
//! it, never the caller's spelling.

use mcpgate_protocol::Era;
use mcpgate_protocol::resource::ReadResourceParams;

use super::invoke::{finish, tool_context};
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::limits::Charge;
use crate::mcp::request_state::{Mode, Round, Target};
use crate::mcp::work::Prepared;
use crate::policy::{Arguments, Item, Use};
use crate::state::AppState;
use mcpgate_runtime::catalog::Outcome;

/// Prepares a read (after opening an echoed requestState) of `params.uri`, already in its
/// normal form. The read is charged to its upstream, if it has one, before the requestState
/// is committed or anything is sent.
pub(in crate::mcp) async fn read_resource(
    state: &AppState,
    cx: &CallContext,
    params: ReadResourceParams,
) -> Result<Prepared, GatewayError> {
    let uri = params.uri;
    let target = Target::new(cx, &uri, &mcpgate_protocol::JsonObject::new(), Mode::Now)?;
    let mut round = Round::resume(state, cx, target, params.request_state.as_deref(), params.input_responses.as_ref())?;
    let state = state.clone();
    let cx = cx.clone();
    Ok(Box::new(move |notifier, cancel| {
        Box::pin(async move {
            let tcx = tool_context(&state, &cx, notifier, cancel);
            let catalog = state.catalog.load();
            // Outside a virtual server's selection a resource does not exist there. A handler
            // is selected by what it is (its fixed URI, or its URI template), never by the URI
            // asked for: a glob over URIs (`file:///public/*`) must not let a template that
            // was not selected serve `file:///public/../private` to it.
            let endpoint = &cx.endpoint;
            let found = catalog
                .resources()
                .iter()
                .filter(|h| {
                    endpoint.selects_all()
                        || h.resource().is_some_and(|r| endpoint.selects_resource(&r.uri))
                        || h.template().is_some_and(|t| endpoint.selects_resource(&t.uri_template))
                })
                .find_map(|h| h.read(&uri, &tcx).map(|read| (h.upstream(), read)));
            let Some((upstream, read)) = found else {
                return Err(GatewayError::ResourceNotFound { uri: uri.clone() });
            };
            let used = Use { target: Item::Resource(&uri), upstream, arguments: Arguments::None };
            endpoint.check(&endpoint.caller(&cx.principal), used)?;
            if let Some(upstream) = upstream {
                state.limits.admit(&cx.principal, Charge::Upstream { upstream }).await?;
            }
            round.commit(&state).await?;
            let modern = cx.era == Era::Modern;
            let read = async {
                match read.await {
                    Outcome::Complete(mut result) if modern => {
                        // Cache hints are required on modern results: default to "do not
                        // cache", and never let a shared cache serve what sits behind
                        // authentication.
                        result.ttl_ms.get_or_insert(0);
                        result.cache_scope = Some(state.cache_scope_for(result.cache_scope));
                        Outcome::Complete(result)
                    }
                    Outcome::Complete(mut result) => {
                        result.ttl_ms = None;
                        result.cache_scope = None;
                        Outcome::Complete(result)
                    }
                    other => other,
                }
            };
            finish(&state, &cx, &round, read).await
        })
    }))
}
