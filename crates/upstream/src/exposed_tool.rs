//! An upstream's tool under its exposed name `<upstream><separator><name>`: the catalog entry
//! the shared catalog registers and a caller's own list (an `oauth` upstream's) resolves, and
//! the task policy its configuration gives it.
//!
//! Invariant: a tool the upstream's filter leaves out, or whose exposed name breaks the MCP
//! name rules, never becomes an entry, whichever list it came from.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_protocol::tool::Tool as ToolInfo;
use mcpgate_runtime::catalog::{TaskPolicy, ToolDescriptor, header_params};

use crate::config::{TaskMode, UpstreamConfig};
use crate::entries::UpstreamTool;
use crate::upstream::Upstream;

/// `info`, a tool of `upstream`, as a catalog entry under its exposed name
/// `<upstream><separator><name>`; `Ok(None)` when the upstream's filter leaves it out; `Err`
/// says why it cannot be exposed.
pub(crate) fn upstream_tool(
    upstream: &Arc<Upstream>,
    separator: &str,
    info: &ToolInfo,
) -> Result<Option<UpstreamTool>, String> {
    let config = upstream.config();
    if !config.exposes(&info.name) {
        return Ok(None);
    }
    let exposed = format!("{}{separator}{}", config.name, info.name);
    if !is_valid_tool_name(&exposed) {
        return Err(format!("its exposed name {exposed:?} breaks the tool name rules (1-128 of A-Z a-z 0-9 _ - .)"));
    }
    let params = header_params::extract(&exposed, &info.input_schema)
        .map_err(|e| format!("invalid x-mcp-header annotations: {e}"))?;
    let upstream_tasks =
        info.execution.as_ref().and_then(|e| e.task_support).unwrap_or(mcpgate_protocol::tool::TaskSupport::Forbidden);
    let mut descriptor_info = info.clone();
    descriptor_info.name = exposed;
    descriptor_info.execution = None;
    let idempotent = config.idempotent.contains(&info.name)
        || info.annotations.as_ref().and_then(|a| a.idempotent_hint) == Some(true);
    let descriptor = ToolDescriptor {
        info: descriptor_info,
        task_policy: policy(config, &info.name),
        retry_safe: idempotent,
        background: config.is_background(&info.name),
        upstream: Some(Arc::from(config.name.as_str())),
    };
    Ok(Some(UpstreamTool::new(upstream.clone(), info.name.clone(), descriptor, params, upstream_tasks)))
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

/// MCP tool names: 1 to 128 of `A-Z a-z 0-9 _ - .`.
fn is_valid_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}
