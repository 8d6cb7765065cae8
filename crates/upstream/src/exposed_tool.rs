//! An upstream's tool under its exposed name (`<upstream><separator><name>`, or its override's
//! `rename`) with its override applied: the catalog entry the shared catalog registers and a
//! caller's own list (an `oauth` upstream's) resolves, and the task policy its configuration
//! gives it.
//!
//! Invariant: a tool the upstream's filter leaves out, or whose exposed name breaks the MCP
//! name rules, never becomes an entry, whichever list it came from; the filter, task policy,
//! `idempotent` and `background` always go by the upstream's own tool name, never the rename.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_protocol::tool::Tool as ToolInfo;
use mcpgate_runtime::catalog::{TaskPolicy, ToolDescriptor, header_params};

use crate::config::{TaskMode, UpstreamConfig, is_valid_tool_name};
use crate::entries::UpstreamTool;
use crate::upstream::Upstream;

/// `info`, a tool of `upstream`, as a catalog entry under its exposed name, its override
/// applied; `Ok(None)` when the upstream's filter leaves it out; `Err` says why it cannot be
/// exposed. A hidden or default argument the upstream's schema lacks is logged, not refused
/// (the upstream may add it later; the value is sent all the same).
pub(crate) fn upstream_tool(
    upstream: &Arc<Upstream>,
    separator: &str,
    info: &ToolInfo,
) -> Result<Option<UpstreamTool>, String> {
    let config = upstream.config();
    if !config.exposes(&info.name) {
        return Ok(None);
    }
    let exposed = config.exposed_name(&info.name, separator);
    if !is_valid_tool_name(&exposed) {
        return Err(format!("its exposed name {exposed:?} breaks the tool name rules (1-128 of A-Z a-z 0-9 _ - .)"));
    }
    // Mirrored to the upstream as its own schema says, over the arguments it is sent; the
    // advertised schema's header params are the catalog's, read from the descriptor.
    let params = header_params::extract(&exposed, &info.input_schema)
        // Text: the reason the tool is left out, logged once at list time with its name.
        .map_err(|e| format!("invalid x-mcp-header annotations: {e}"))?;
    let upstream_tasks =
        info.execution.as_ref().and_then(|e| e.task_support).unwrap_or(mcpgate_protocol::tool::TaskSupport::Forbidden);
    let overridden = config.overrides.get(&info.name);
    let (mut descriptor_info, missing) = overridden.map_or_else(
        || (ToolInfo { name: exposed.clone(), ..info.clone() }, Vec::new()),
        |o| o.advertise(info, exposed.clone()),
    );
    for argument in missing {
        tracing::warn!(
            upstream = %config.name,
            tool = %info.name,
            %argument,
            "an override's hidden or default argument is not in the upstream's input schema; it is sent all the same"
        );
    }
    descriptor_info.execution = None;
    // The operator's idempotentHint counts as much as the upstream's.
    let idempotent = config.idempotent.contains(&info.name)
        || descriptor_info.annotations.as_ref().and_then(|a| a.idempotent_hint) == Some(true);
    let descriptor = ToolDescriptor {
        info: descriptor_info,
        task_policy: policy(config, &info.name),
        retry_safe: idempotent,
        background: config.is_background(&info.name),
        upstream: Some(Arc::from(config.name.as_str())),
    };
    let overridden = overridden.cloned().map(Arc::new);
    Ok(Some(UpstreamTool::new(upstream.clone(), info.name.clone(), descriptor, params, upstream_tasks, overridden)))
}

/// The task policy `config` gives its tool `tool`.
pub(crate) fn policy(config: &UpstreamConfig, tool: &str) -> TaskPolicy {
    match config.task_mode(tool) {
        TaskMode::Never => TaskPolicy::Forbidden,
        TaskMode::Auto => TaskPolicy::Auto { after: Duration::from_millis(config.task_after_ms) },
        TaskMode::Optional => TaskPolicy::Optional,
        TaskMode::Always => TaskPolicy::Required,
    }
}
