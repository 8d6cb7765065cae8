//! Conformance fixtures for the tasks extension: a tool that greets synchronously, one that
//! computes for a while (task optional), one that fails as a tool (`isError`), one that fails
//! with a protocol error, two that ask for input while running as a task, and one that needs
//! an answer before its task can start (`test_tool_with_task`).

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::tool::CallToolResult;

use super::tools::elicitation_request;
use crate::catalog::ask::{self, FormAnswer, form_answer};
use crate::catalog::{
    BoxFuture, CatalogBuilder, Failure, FnTool, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor,
    decode_args,
};

/// Longest `slow_compute` accepted.
const MAX_SECONDS: f64 = 600.0;

pub(super) fn install(b: &mut CatalogBuilder) {
    b.tool(SlowCompute {
        descriptor: ToolDescriptor::new(
            "slow_compute",
            "Computes for `seconds` seconds; runs as a task when the client supports tasks.",
            json!({"type": "object", "properties": {
                "seconds": {"type": "number", "minimum": 0, "maximum": MAX_SECONDS},
                "label": {"type": "string"}
            }}),
        )
        .task_policy(TaskPolicy::Optional),
    });
    b.tool(Delayed {
        descriptor: ToolDescriptor::new(
            "failing_job",
            "A job that fails after a second (a tool error, isError: true).",
            json!({"type": "object"}),
        )
        .task_policy(TaskPolicy::Required),
        outcome: || Outcome::Complete(CallToolResult::error("The job failed: the input data was rejected")),
    });
    b.tool(Delayed {
        descriptor: ToolDescriptor::new(
            "protocol_error_job",
            "A job that ends with a protocol error.",
            json!({"type": "object"}),
        )
        .task_policy(TaskPolicy::Required),
        outcome: || Outcome::Failed(Failure::InvalidParams("the job could not interpret its request".to_owned())),
    });
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "confirm_delete",
            "Deletes a file after the user confirms.",
            json!({"type": "object", "properties": {"filename": {"type": "string"}}, "required": ["filename"]}),
        )
        .task_policy(TaskPolicy::Optional),
        confirm_delete,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new("multi_input", "Asks for a name and a confirmation at once.", json!({"type": "object"}))
            .task_policy(TaskPolicy::Optional),
        multi_input,
    ));
    b.tool(GreetAsTask {
        descriptor: ToolDescriptor::new(
            "test_tool_with_task",
            "Asks for the user's name first, then greets them from a task.",
            json!({"type": "object", "properties": {}}),
        )
        .task_policy(TaskPolicy::Required),
    });
}

/// Needs the user's name before its task can start: asked synchronously (2026-07-28), or by
/// the task itself when the call could not ask first (2025-11-25).
struct GreetAsTask {
    descriptor: ToolDescriptor,
}

impl GreetAsTask {
    fn ask_name() -> InputRequests {
        InputRequests::from([("user_name".to_owned(), ask::form_field("What is your name?", "name", "string"))])
    }
}

impl Tool for GreetAsTask {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn preflight(&self, call: &ToolCall, _: &ClientCapabilities) -> Outcome<()> {
        match form_answer(&call.input_responses, "user_name") {
            FormAnswer::Missing => Outcome::NeedInput { requests: Self::ask_name(), state: None },
            _ => Outcome::Complete(()),
        }
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let answer = form_answer(&call.input_responses, "user_name");
            if answer == FormAnswer::Missing {
                return Outcome::NeedInput { requests: Self::ask_name(), state: None };
            }
            let name = answer.text("name").unwrap_or("stranger").to_owned();
            cx.progress(0.0, None, Some(&format!("greeting {name}"))).await;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(300)) => {}
                () = cx.cancelled() => return Outcome::Failed(Failure::Internal("cancelled".to_owned())),
            }
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
                "Hello, {name}! (from a task)"
            ))]))
        })
    }
}

struct SlowCompute {
    descriptor: ToolDescriptor,
}

#[derive(Deserialize)]
struct ComputeArgs {
    #[serde(default)]
    seconds: f64,
    #[serde(default)]
    label: Option<String>,
}

impl ComputeArgs {
    fn parse(arguments: &Value) -> Result<Self, Failure> {
        let args = decode_args::<Self>(arguments)?;
        if !(0.0..=MAX_SECONDS).contains(&args.seconds) {
            return Err(Failure::InvalidArguments(format!("invalid arguments: seconds must be 0 to {MAX_SECONDS}")));
        }
        Ok(args)
    }
}

impl Tool for SlowCompute {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        ComputeArgs::parse(arguments).map(drop)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let args = match ComputeArgs::parse(&call.arguments) {
                Ok(a) => a,
                Err(e) => return Outcome::Failed(e),
            };
            cx.progress(0.0, Some(args.seconds), Some("computing")).await;
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(args.seconds)) => {}
                () = cx.cancelled() => return Outcome::Failed(Failure::Internal("cancelled".to_owned())),
            }
            let label = args.label.unwrap_or_else(|| "result".to_owned());
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
                "Computed {label} in {} s",
                args.seconds
            ))]))
        })
    }
}

/// Waits a second, then ends the way its fixture should.
struct Delayed {
    descriptor: ToolDescriptor,
    outcome: fn() -> Outcome<CallToolResult>,
}

impl Tool for Delayed {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => (self.outcome)(),
                () = cx.cancelled() => Outcome::Failed(Failure::Internal("cancelled".to_owned())),
            }
        })
    }
}

fn confirm_delete(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let filename = call.arguments.get("filename").and_then(Value::as_str).unwrap_or("the file").to_owned();
    match form_answer(&call.input_responses, "confirm") {
        FormAnswer::Missing => Outcome::NeedInput {
            requests: elicitation_request(&format!("Delete {filename}?"), "confirm", "boolean"),
            state: None,
        },
        answer if answer.flag("confirm") == Some(true) => {
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("Deleted {filename}"))]))
        }
        _ => Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("Kept {filename}"))])),
    }
}

fn multi_input(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let mut missing = InputRequests::new();
    if !call.input_responses.contains_key("name") {
        missing.extend(elicitation_request("What is your name?", "name", "string"));
    }
    if !call.input_responses.contains_key("confirm") {
        missing.extend(elicitation_request("Shall I go ahead?", "confirm", "boolean"));
    }
    if !missing.is_empty() {
        return Outcome::NeedInput { requests: missing, state: None };
    }
    let name = form_answer(&call.input_responses, "name").text("name").unwrap_or("someone");
    Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("Thanks, {name}: done"))]))
}
