//! The `PromptHandler` trait: renders a prompt template, possibly after input rounds, and
//! completes its arguments.

use std::collections::BTreeMap;

use mcpgate_protocol::prompt::{GetPromptResult, Prompt};

use super::context::ToolContext;
use super::outcome::Outcome;
use super::tool::{BoxFuture, ToolCall};

/// A prompt.
pub trait PromptHandler: Send + Sync + 'static {
    /// The descriptor.
    fn descriptor(&self) -> &Prompt;

    /// Renders the prompt; `call.arguments` holds the string arguments as a JSON object.
    fn get<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<GetPromptResult>>;

    /// The upstream server the prompt comes from (`None` for a prompt of this gateway):
    /// `prompts/get` of it counts against that upstream's rate limits.
    fn upstream(&self) -> Option<&str> {
        None
    }

    /// Completion values for one argument given what was typed so far.
    fn complete(&self, _argument: &str, _value: &str, _context: &BTreeMap<String, String>) -> Vec<String> {
        Vec::new()
    }
}
