//! The fixtures of the conformance suite's 2025-11-25 scenarios where a tool asks the client
//! mid-call (`tools-call-elicitation`, `tools-call-sampling`, `elicitation-sep1034-defaults`,
//! `elicitation-sep1330-enums`). Each is an ordinary input round: a 2026-07-28 client answers
//! it as a multi-round call, a 2025-11-25 client as server→client requests on the call's
//! stream (the gateway's legacy input bridge).

use serde_json::{Value, json};

use mcpgate_protocol::input::{InputRequest, InputRequests, InputResponse};
use mcpgate_protocol::tool::CallToolResult;

use crate::catalog::ask::sampled_text;
use crate::catalog::{CatalogBuilder, FnTool, Outcome, ToolCall, ToolContext, ToolDescriptor, ask};
use mcpgate_protocol::content::ContentBlock;

fn asking(key: &str, request: InputRequest) -> Outcome<CallToolResult> {
    Outcome::NeedInput { requests: InputRequests::from([(key.to_owned(), request)]), state: None }
}

fn text(text: String) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

/// A form round under `key`; once answered, "Elicitation completed: action=…, content={…}".
fn form_round(call: &ToolCall, key: &str, message: &str, schema: Value) -> Outcome<CallToolResult> {
    match call.input_responses.get(key) {
        Some(InputResponse::Elicitation(result)) => {
            let action = serde_json::to_value(result.action).unwrap_or(Value::Null);
            let content = result.content.clone().map_or(Value::Null, Value::Object);
            text(format!("Elicitation completed: action={}, content={content}", action.as_str().unwrap_or("?")))
        }
        _ => asking(key, ask::form(message, schema)),
    }
}

fn elicitation(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let message = call.arguments.get("message").and_then(Value::as_str).unwrap_or("Please provide your information");
    let schema = json!({
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    });
    form_round(call, "user_info", message, schema)
}

fn sampling(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    match sampled_text(&call.input_responses, "completion") {
        Some(answer) => text(format!("LLM response: {answer}")),
        None => {
            let prompt = call.arguments.get("prompt").and_then(Value::as_str).unwrap_or("Hello");
            asking("completion", ask::sample(prompt, 100))
        }
    }
}

fn defaults(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": true},
        },
    });
    form_round(call, "profile", "Please review your profile", schema)
}

fn enums(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let schema = json!({
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "oneOf": [
                {"const": "value1", "title": "First Option"},
                {"const": "value2", "title": "Second Option"},
                {"const": "value3", "title": "Third Option"},
            ]},
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "items": {"anyOf": [
                {"const": "value1", "title": "First Choice"},
                {"const": "value2", "title": "Second Choice"},
                {"const": "value3", "title": "Third Choice"},
            ]}},
        },
    });
    form_round(call, "choices", "Please choose", schema)
}

pub(super) fn install(b: &mut CatalogBuilder) {
    let args = |name: &str, description: &str| json!({"type": "object", "properties": {name: {"type": "string", "description": description}}, "required": [name]});
    let none = || json!({"type": "object", "properties": {}});
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "test_elicitation",
            "Asks the user for a username and an email address.",
            args("message", "The message to show the user"),
        ),
        elicitation,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "test_sampling",
            "Asks the client's model to complete a prompt.",
            args("prompt", "The prompt to send to the LLM"),
        ),
        sampling,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "test_elicitation_sep1034_defaults",
            "Asks with a default for every primitive type.",
            none(),
        ),
        defaults,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new("test_elicitation_sep1330_enums", "Asks with every kind of enum field.", none()),
        enums,
    ));
}
