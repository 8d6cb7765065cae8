//! A background tool called by a client that asked for no task (see `mcp::companions`): the
//! call starts a durable task and answers at once with its id and how to follow it.
//!
//! Invariant: a background call made while every task worker of this replica is taken is
//! refused with a "busy, retry after N s" result, checked before the call commits to anything,
//! instead of queueing behind them.

use bytes::Bytes;
use serde_json::json;

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;

use crate::call_context::CallContext;
use crate::config::BackgroundConfig;
use crate::error::GatewayError;
use crate::mcp::render;
use crate::state::AppState;
use crate::tasks::TaskPlan;

/// The busy answer, when every task worker of this replica is taken (`None` otherwise):
/// checked before the call commits to anything, so the client's retry starts afresh.
pub(super) fn refuse_when_busy(state: &AppState, cx: &CallContext, tool: &str) -> Option<Result<Bytes, GatewayError>> {
    if !state.tasks.workers().is_saturated() {
        return None;
    }
    state.metrics.background_busy();
    let secs = state.config.background.busy_retry_secs;
    let mut result = CallToolResult::error(format!(
        "The server is busy: every background worker is taken. Call {tool} again in {secs} s."
    ));
    result.structured_content = Some(json!({ "busy": true, "retryAfterSecs": secs }));
    Some(render::complete(cx, result))
}

/// Starts a background tool's call as a task and answers with how to follow it.
pub(super) async fn start(state: &AppState, cx: &CallContext, plan: TaskPlan) -> Result<Bytes, GatewayError> {
    let tool = plan.tool.clone();
    let record = state.tasks.create(cx, plan).await?;
    let id = record.id.as_str();
    let BackgroundConfig { status_tool, result_tool, cancel_tool, .. } = &state.config.background;
    let text = format!(
        "Started {tool} in the background as task {id}. Call {status_tool} with {{\"taskId\": \"{id}\"}} to follow \
         it, {result_tool} to get its result once it is done, or {cancel_tool} to stop it."
    );
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content =
        Some(json!({ "taskId": id, "status": record.status.as_str(), "pollAfterMs": record.poll_interval_ms }));
    render::complete(cx, result)
}
