//! What an endpoint says it offers: its capabilities in each era and its `server/discover`
//! result, from what it serves (tools, prompts, resources).
//!
//! Invariant: a capability is announced only for a kind the endpoint serves; `server/discover`
//! is rendered once, at start-up, as it never varies per request.

use std::sync::Arc;

use bytes::Bytes;

use mcpgate_protocol::capabilities::{
    ListChangedCapability, ResourcesCapability, ServerCapabilities, ServerTasksCapability, TASKS_EXTENSION,
};
use mcpgate_protocol::discover::DiscoverResult;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::{CacheScope, ResultMeta, ResultType};
use mcpgate_protocol::{JsonObject, ProtocolVersion};

use crate::error::GatewayError;

/// What this server offers. Lists change (upstreams' lists, tools announcing changes) and
/// the changes reach listen streams (2026-07-28) and GET streams (2025-11-25); resource
/// subscriptions are not offered.
fn capabilities((tools, prompts, resources): (bool, bool, bool)) -> ServerCapabilities {
    let list_changed = || ListChangedCapability { list_changed: Some(true) };
    ServerCapabilities {
        tools: tools.then(list_changed),
        prompts: prompts.then(list_changed),
        resources: resources.then_some(ResourcesCapability { subscribe: None, list_changed: Some(true) }),
        completions: (prompts || resources).then(JsonObject::new),
        ..ServerCapabilities::default()
    }
}

/// Modern: tasks are the `io.modelcontextprotocol/tasks` extension.
fn modern_capabilities(has: (bool, bool, bool)) -> ServerCapabilities {
    let mut extensions = JsonObject::new();
    extensions.insert(TASKS_EXTENSION.to_owned(), serde_json::Value::Object(JsonObject::new()));
    ServerCapabilities { extensions: Some(extensions), ..capabilities(has) }
}

/// Legacy: core tasks exist only in 2025-11-25; `tasks/list` only behind authentication
/// (without it every caller would share one owner).
pub(crate) fn legacy_capabilities(
    has: (bool, bool, bool),
    version: ProtocolVersion,
    authenticated: bool,
) -> ServerCapabilities {
    let mut caps = capabilities(has);
    if version.has_core_tasks() {
        let empty = || Some(JsonObject::new());
        let mut requests = JsonObject::new();
        requests.insert("tools".to_owned(), serde_json::json!({ "call": {} }));
        caps.tasks = Some(ServerTasksCapability {
            list: if authenticated { empty() } else { None },
            cancel: empty(),
            requests: Some(requests),
        });
    }
    caps
}

/// The `server/discover` result of an endpoint serving `has` (tools, prompts, resources),
/// rendered once at start-up (it never varies per request).
pub(crate) fn discover_result(
    has: (bool, bool, bool),
    server_info: &Arc<Implementation>,
    instructions: Option<String>,
    ttl_ms: u64,
    cache_scope: CacheScope,
) -> Result<Bytes, GatewayError> {
    let result = DiscoverResult {
        supported_versions: ProtocolVersion::all_strs().iter().map(|v| (*v).to_owned()).collect(),
        capabilities: modern_capabilities(has),
        instructions,
        ttl_ms,
        cache_scope,
        result_type: Some(ResultType::Complete),
        meta: Some(ResultMeta::server(server_info.clone())),
    };
    serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal_caused("discover", e))
}
