//! The `demo` toolset: small tools with real behaviour to try the gateway with — echo, sum,
//! a slow report that streams progress and stops when cancelled, a tool that fails the way
//! tools should (a result with `isError: true`), tools that ask for input mid-call
//! (`interactive`), a prompt and two resources.

mod batch;
mod interactive;

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_protocol::content::{ContentBlock, ResourceContents};
use mcpgate_protocol::meta::LoggingLevel;
use mcpgate_protocol::prompt::{GetPromptResult, Prompt, PromptArgument, PromptMessage};
use mcpgate_protocol::resource::{Resource, ResourceTemplate};
use mcpgate_protocol::tool::{CallToolResult, ToolAnnotations};

use crate::catalog::{
    BoxFuture, CatalogBuilder, Failure, FnPrompt, FnTool, Outcome, StaticResource, TemplateResource, Tool, ToolCall,
    ToolContext, ToolDescriptor, decode_args,
};

const README: &str = "# mcpgate demo\n\nTools: `echo`, `sum`, `slow_report` (streams progress when called with a \
progressToken and `Accept: text/event-stream`), `background_report` (answers at once with a task id; follow it with \
`task_status`, `task_result`, `task_cancel`), `process_batch` (checkpoints after each item, so a busy replica can hand it to \
another), `update_work_item`, `delete_records` and `summarize_text` (ask for \
input mid-call), `fail` (returns isError: true).\nPrompt: `summarize`.\n";

/// Registers the demo toolset.
pub(super) fn install(b: &mut CatalogBuilder) {
    let read_only = ToolAnnotations { read_only_hint: Some(true), idempotent_hint: Some(true), ..Default::default() };
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "echo",
            "Echo back the given text.",
            json!({"type": "object", "properties": {"text": {"type": "string", "description": "Text to echo back"}}, "required": ["text"]}),
        )
        .title("Echo")
        .annotations(read_only.clone()),
        echo,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "sum",
            "Add up a list of numbers.",
            json!({"type": "object", "properties": {"numbers": {"type": "array", "items": {"type": "number"}, "description": "Numbers to add"}}, "required": ["numbers"]}),
        )
        .title("Sum")
        .annotations(read_only)
        .output_schema(json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]})),
        sum,
    ));
    b.tool(SlowReport::new());
    b.tool(SlowReport::background());
    interactive::install(b);
    b.tool(batch::ProcessBatch::new());
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "fail",
            "Always fails with a tool error (isError: true), to show what a failing tool looks like.",
            json!({"type": "object", "properties": {"reason": {"type": "string", "description": "Why it fails"}}}),
        )
        .title("Fail"),
        fail,
    ));
    b.prompt(
        FnPrompt::new(
            Prompt {
                name: "summarize".to_owned(),
                title: Some("Summarize".to_owned()),
                description: Some("Ask the model to summarize a text in a given style.".to_owned()),
                arguments: Some(vec![
                    PromptArgument {
                        name: "text".to_owned(),
                        title: None,
                        description: Some("The text to summarize".to_owned()),
                        required: Some(true),
                    },
                    PromptArgument {
                        name: "style".to_owned(),
                        title: None,
                        description: Some("brief, detailed or bullet-points".to_owned()),
                        required: Some(false),
                    },
                ]),
                icons: None,
                meta: None,
            },
            summarize,
        )
        .with_completion(complete_style),
    );
    b.resource(StaticResource::new(
        Resource {
            uri: "mcpgate://demo/readme".to_owned(),
            name: "readme".to_owned(),
            title: Some("About the demo toolset".to_owned()),
            description: None,
            mime_type: Some("text/markdown".to_owned()),
            size: Some(README.len() as u64),
            icons: None,
            annotations: None,
            meta: None,
        },
        vec![ResourceContents::text("mcpgate://demo/readme", "text/markdown", README)],
        60_000,
    ));
    if let Some(greeting) = TemplateResource::new(
        ResourceTemplate {
            uri_template: "mcpgate://demo/greeting/{name}".to_owned(),
            name: "greeting".to_owned(),
            title: Some("A greeting".to_owned()),
            description: Some("A greeting for anyone".to_owned()),
            mime_type: Some("text/plain".to_owned()),
            icons: None,
            annotations: None,
            meta: None,
        },
        |uri, vars| {
            let name = vars.get("name").map_or("friend", String::as_str);
            Outcome::Complete(vec![ResourceContents::text(uri, "text/plain", format!("Hello, {name}!"))])
        },
    ) {
        b.resource(greeting.with_completion(|_, value| {
            ["Ada", "Alan", "Grace"].iter().filter(|n| n.starts_with(value)).map(|n| (*n).to_owned()).collect()
        }));
    }
}

fn echo(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    #[derive(Deserialize)]
    struct Args {
        text: String,
    }
    match decode_args::<Args>(&call.arguments) {
        Ok(args) => Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(args.text)])),
        Err(e) => Outcome::Failed(e),
    }
}

fn sum(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    #[derive(Deserialize)]
    struct Args {
        numbers: Vec<f64>,
    }
    match decode_args::<Args>(&call.arguments) {
        Ok(args) => {
            let total: f64 = args.numbers.iter().sum();
            let mut result = CallToolResult::success(vec![ContentBlock::text(total.to_string())]);
            result.structured_content = Some(json!({ "sum": total }));
            Outcome::Complete(result)
        }
        Err(e) => Outcome::Failed(e),
    }
}

fn fail(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let reason = call.arguments.get("reason").and_then(Value::as_str).unwrap_or("this tool always fails");
    Outcome::Complete(CallToolResult::error(format!("The operation failed: {reason}")))
}

fn summarize(call: &ToolCall, _: &ToolContext) -> Outcome<GetPromptResult> {
    let text = call.arguments.get("text").and_then(Value::as_str).unwrap_or_default();
    let style = call.arguments.get("style").and_then(Value::as_str).unwrap_or("brief");
    Outcome::Complete(GetPromptResult {
        description: Some(format!("A {style} summary request")),
        messages: vec![PromptMessage::user(ContentBlock::text(format!(
            "Summarize the following text in a {style} style:\n\n{text}"
        )))],
        ..Default::default()
    })
}

fn complete_style(argument: &str, value: &str) -> Vec<String> {
    if argument != "style" {
        return Vec::new();
    }
    ["brief", "detailed", "bullet-points"].iter().filter(|s| s.starts_with(value)).map(|s| (*s).to_owned()).collect()
}

/// Takes `seconds` seconds, reporting progress every second; stops when cancelled.
struct SlowReport {
    descriptor: ToolDescriptor,
}

impl SlowReport {
    fn new() -> Self {
        Self {
            descriptor: ToolDescriptor::new(
                "slow_report",
                "Compile a report on a topic; takes `seconds` seconds and reports progress every second.",
                json!({"type": "object", "properties": {
                    "topic": {"type": "string", "description": "What the report is about"},
                    "seconds": {"type": "integer", "minimum": 1, "maximum": 60, "default": 3, "description": "How long it takes"}
                }, "required": ["topic"]}),
            )
            .title("Slow report")
            .task_policy(crate::catalog::TaskPolicy::Optional),
        }
    }

    /// The same work as a background tool: a client that takes no tasks gets a task id at once
    /// and follows it with the companion tools.
    fn background() -> Self {
        let mut report = Self::new();
        report.descriptor.info.name = "background_report".to_owned();
        report.descriptor.info.title = Some("Background report".to_owned());
        report.descriptor.info.description = Some(
            "Compile a report on a topic in the background: answers at once with a task id to follow with \
             task_status and task_result; takes `seconds` seconds."
                .to_owned(),
        );
        report.descriptor.background = true;
        report
    }
}

#[derive(Deserialize)]
struct ReportArgs {
    topic: String,
    #[serde(default = "default_seconds")]
    seconds: u64,
}

fn default_seconds() -> u64 {
    3
}

impl ReportArgs {
    fn parse(arguments: &Value) -> Result<Self, Failure> {
        let args = decode_args::<Self>(arguments)?;
        if !(1..=60).contains(&args.seconds) {
            return Err(Failure::InvalidArguments("invalid arguments: seconds must be 1 to 60".to_owned()));
        }
        Ok(args)
    }
}

impl Tool for SlowReport {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        ReportArgs::parse(arguments).map(drop)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let args = match ReportArgs::parse(&call.arguments) {
                Ok(a) => a,
                Err(e) => return Outcome::Failed(e),
            };
            let total = args.seconds as f64;
            cx.log(LoggingLevel::Info, json!(format!("report on {} started", args.topic))).await;
            for step in 0..args.seconds {
                let message = format!("Compiled section {} of {}", step + 1, args.seconds);
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_secs(1)) => {}
                    () = cx.cancelled() => return Outcome::Failed(Failure::Internal("cancelled".to_owned())),
                }
                cx.progress((step + 1) as f64, Some(total), Some(&message)).await;
            }
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
                "Report on {}: {} sections compiled.",
                args.topic, args.seconds
            ))]))
        })
    }
}
