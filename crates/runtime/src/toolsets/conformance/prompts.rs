//! Conformance prompt fixtures.

use serde_json::Value;

use mcpgate_protocol::content::{ContentBlock, ResourceContents};
use mcpgate_protocol::prompt::{GetPromptResult, Prompt, PromptArgument, PromptMessage};

use super::PNG;
use crate::catalog::{CatalogBuilder, FnPrompt, Outcome, ToolCall};

fn prompt(name: &str, description: &str, args: &[&str]) -> Prompt {
    Prompt {
        name: name.to_owned(),
        title: None,
        description: Some(description.to_owned()),
        arguments: (!args.is_empty()).then(|| {
            args.iter()
                .map(|a| PromptArgument { name: (*a).to_owned(), title: None, description: None, required: Some(true) })
                .collect()
        }),
        icons: None,
        meta: None,
    }
}

fn messages(messages: Vec<PromptMessage>) -> Outcome<GetPromptResult> {
    Outcome::Complete(GetPromptResult { messages, ..Default::default() })
}

fn arg<'a>(call: &'a ToolCall, name: &str) -> &'a str {
    call.arguments.get(name).and_then(Value::as_str).unwrap_or_default()
}

pub(super) fn install(b: &mut CatalogBuilder) {
    b.prompt(FnPrompt::new(prompt("test_simple_prompt", "A simple prompt without arguments.", &[]), |_, _| {
        messages(vec![PromptMessage::user(ContentBlock::text("This is a simple prompt for testing."))])
    }));
    b.prompt(
        FnPrompt::new(
            prompt("test_prompt_with_arguments", "A prompt with two required arguments.", &["arg1", "arg2"]),
            |call, _| {
                let text = format!("Prompt with arguments: arg1='{}', arg2='{}'", arg(call, "arg1"), arg(call, "arg2"));
                messages(vec![PromptMessage::user(ContentBlock::text(text))])
            },
        )
        .with_completion(|_, value| {
            ["paris", "park", "test", "testing"]
                .iter()
                .filter(|v| v.starts_with(value))
                .map(|v| (*v).to_owned())
                .collect()
        }),
    );
    b.prompt(FnPrompt::new(
        prompt("test_prompt_with_embedded_resource", "A prompt that embeds a resource.", &["resourceUri"]),
        |call, _| {
            messages(vec![
                PromptMessage::user(ContentBlock::resource(ResourceContents::text(
                    arg(call, "resourceUri"),
                    "text/plain",
                    "Embedded resource content for testing.",
                ))),
                PromptMessage::user(ContentBlock::text("Please process the embedded resource above.")),
            ])
        },
    ));
    b.prompt(FnPrompt::new(prompt("test_prompt_with_image", "A prompt that includes an image.", &[]), |_, _| {
        messages(vec![
            PromptMessage::user(ContentBlock::image(PNG, "image/png")),
            PromptMessage::user(ContentBlock::text("Please analyze the image above.")),
        ])
    }));
}
