//! The conformance suite's list-change hooks: `test_trigger_tool_change` and
//! `test_trigger_prompt_change` announce that the tool (prompt) list changed, through the
//! store, so every listen stream on every replica that asked for it gets the notification —
//! the path an upstream's list change takes.

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::Change;
use serde_json::json;

use crate::catalog::{BoxFuture, CatalogBuilder, Outcome, Tool, ToolCall, ToolContext, ToolDescriptor};

/// A tool that announces one kind of change.
struct Trigger {
    descriptor: ToolDescriptor,
    change: Change,
}

impl Tool for Trigger {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            if cx.announce(self.change.clone()).await {
                Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("Change announced to listeners.")]))
            } else {
                Outcome::Complete(CallToolResult::error("The change could not be announced; see the server log."))
            }
        })
    }
}

pub(super) fn install(b: &mut CatalogBuilder) {
    let no_args = || json!({"type": "object", "properties": {}});
    b.tool(Trigger {
        descriptor: ToolDescriptor::new(
            "test_trigger_tool_change",
            "Announces a tool list change to every listen stream that asked for tool list changes.",
            no_args(),
        ),
        change: Change::ToolsListChanged,
    });
    b.tool(Trigger {
        descriptor: ToolDescriptor::new(
            "test_trigger_prompt_change",
            "Announces a prompt list change to every listen stream that asked for prompt list changes.",
            no_args(),
        ),
        change: Change::PromptsListChanged,
    });
}
