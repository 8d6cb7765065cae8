//! Conformance tool fixtures.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate_protocol::capabilities::{ClientCapabilities, SamplingCapability};
use mcpgate_protocol::content::{ContentBlock, ResourceContents};
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::meta::LoggingLevel;
use mcpgate_protocol::tool::CallToolResult;

use super::{PNG, WAV};
use crate::catalog::{
    BoxFuture, CatalogBuilder, Failure, FnTool, Outcome, Tool, ToolCall, ToolContext, ToolDescriptor, ask,
};

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn fixed(name: &str, description: &str, content: fn() -> CallToolResult) -> FnTool {
    FnTool::new(ToolDescriptor::new(name, description, no_args()), move |_, _| Outcome::Complete(content()))
}

pub(super) fn install(b: &mut CatalogBuilder) {
    b.tool(FnTool::new(
        ToolDescriptor::new("test_simple_text", "Returns a simple text response.", no_args()),
        |_, _| {
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(
                "This is a simple text response for testing.",
            )]))
        },
    ));
    b.tool(fixed("test_image_content", "Returns an image (a 1x1 PNG).", || {
        CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")])
    }));
    b.tool(fixed("test_audio_content", "Returns audio (a short WAV).", || {
        CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")])
    }));
    b.tool(fixed("test_embedded_resource", "Returns an embedded text resource.", || {
        CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        ))])
    }));
    b.tool(fixed("test_multiple_content_types", "Returns text, an image and an embedded resource.", || {
        CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG, "image/png"),
            ContentBlock::resource(ResourceContents::text(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            )),
        ])
    }));
    b.tool(fixed("test_error_handling", "Always returns a tool error (isError: true).", || {
        CallToolResult::error("This tool intentionally returns an error for testing")
    }));
    b.tool(Stepped::progress());
    b.tool(Stepped::logging("test_tool_with_logging", "Sends three log messages while it runs."));
    b.tool(Stepped::logging("test_logging_tool", "Logs only when the request asks for a log level."));
    b.tool(FnTool::new(
        ToolDescriptor::new("test_missing_capability", "Needs the client's sampling capability.", no_args()),
        |_, cx| {
            if cx.capabilities().sampling.is_none() {
                let required =
                    ClientCapabilities { sampling: Some(SamplingCapability::default()), ..Default::default() };
                return Outcome::Failed(Failure::MissingCapability {
                    required: Box::new(required),
                    message: "test_missing_capability needs the sampling capability".to_owned(),
                });
            }
            Outcome::NeedInput { requests: sampling_request("Say hello."), state: None }
        },
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "test_streaming_elicitation",
            "Asks the user a question through an input request.",
            no_args(),
        ),
        |_, _| Outcome::NeedInput {
            requests: elicitation_request("Do you want to continue?", "ok", "boolean"),
            state: None,
        },
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            json_schema_2020_12(),
        ),
        |call, _| {
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
                "Received: {}",
                call.arguments
            ))]))
        },
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "test_custom_header",
            "Mirrors its region argument into the Mcp-Param-Region header.",
            json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}, "required": ["region"]}),
        ),
        |call, _| {
            let region = call.arguments.get("region").and_then(Value::as_str).unwrap_or_default();
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("Region: {region}"))]))
        },
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "greet",
            "Greets someone by name.",
            json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
        ),
        |call, _| match call.arguments.get("name").and_then(Value::as_str) {
            Some(name) => {
                Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("Hello, {name}!"))]))
            }
            None => Outcome::Failed(Failure::InvalidArguments("name is required".to_owned())),
        },
    ));
}

fn json_schema_2020_12() -> Value {
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {
            "name": {"type": "string"},
            "address": {"$ref": "#/$defs/address"},
            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
            "phone": {"type": "string"},
            "email": {"type": "string"}
        },
        "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
        "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
        "then": {"required": ["phone"]},
        "else": {"required": ["email"]},
        "additionalProperties": false
    })
}

/// One form elicitation with a single field, under the field's name.
pub(super) fn elicitation_request(message: &str, field: &str, kind: &str) -> InputRequests {
    InputRequests::from([(field.to_owned(), ask::form_field(message, field, kind))])
}

/// One sampling request with a single user message, under `sample`.
pub(super) fn sampling_request(prompt: &str) -> InputRequests {
    InputRequests::from([("sample".to_owned(), ask::sample(prompt, 100))])
}

/// Tools that do three timed steps, each reported as progress or as a log message.
struct Stepped {
    descriptor: ToolDescriptor,
    logs: bool,
}

impl Stepped {
    fn progress() -> Self {
        let descriptor = ToolDescriptor::new(
            "test_tool_with_progress",
            "Reports progress 0, 50 and 100 of 100, then returns.",
            no_args(),
        );
        Self { descriptor, logs: false }
    }

    fn logging(name: &str, description: &str) -> Self {
        Self { descriptor: ToolDescriptor::new(name, description, no_args()), logs: true }
    }
}

impl Tool for Stepped {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let steps = ["Tool execution started", "Tool processing data", "Tool execution completed"];
            for (i, step) in steps.iter().enumerate() {
                if self.logs {
                    cx.log(LoggingLevel::Info, json!(step)).await;
                } else {
                    let progress = (i * 50) as f64;
                    cx.progress(progress, Some(100.0), Some(&format!("Completed step {progress} of 100"))).await;
                }
                if i + 1 < steps.len() {
                    tokio::select! {
                        () = tokio::time::sleep(Duration::from_millis(50)) => {}
                        () = cx.cancelled() => return Outcome::Failed(Failure::Internal("cancelled".to_owned())),
                    }
                }
            }
            let text = if self.logs { "Logging test completed" } else { "Progress test completed" };
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
        })
    }
}
