//! The small vocabulary tools use for multi-round input: building the requests (ask the user
//! with a form, ask the client's model, ask for the client's roots) and reading the answers.
//!
//! Invariant: readers never panic on what a client sent; an answer of the wrong kind reads
//! as no answer, so the tool asks again.

use serde_json::Value;

use mcpgate_protocol::JsonObject;
use mcpgate_protocol::content::{Role, TextContent};
use mcpgate_protocol::elicitation::{ElicitAction, ElicitFormParams, ElicitParams};
use mcpgate_protocol::input::{InputRequest, InputResponse, InputResponses};
use mcpgate_protocol::roots::Root;
use mcpgate_protocol::sampling::{CreateMessageParams, SamplingBlock, SamplingContent, SamplingMessage};

/// A form elicitation: `message` and a flat object `schema` (`{"type":"object",...}`).
pub fn form(message: &str, schema: Value) -> InputRequest {
    let requested_schema = match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    };
    InputRequest::Elicitation {
        params: ElicitParams::Form(ElicitFormParams { mode: None, message: message.to_owned(), requested_schema }),
    }
}

/// A form with one required field of a JSON Schema primitive `kind` (`string`, `boolean`, ...).
pub fn form_field(message: &str, field: &str, kind: &str) -> InputRequest {
    form(message, serde_json::json!({"type": "object", "properties": {field: {"type": kind}}, "required": [field]}))
}

/// A request to the client's model: one user message.
pub fn sample(prompt: &str, max_tokens: u64) -> InputRequest {
    InputRequest::Sampling {
        params: CreateMessageParams {
            messages: vec![SamplingMessage {
                role: Role::User,
                content: SamplingContent::One(SamplingBlock::Text(TextContent {
                    text: prompt.to_owned(),
                    annotations: None,
                    meta: None,
                })),
                meta: None,
            }],
            max_tokens,
            model_preferences: None,
            system_prompt: None,
            include_context: None,
            temperature: None,
            stop_sequences: None,
            metadata: None,
            tools: None,
            tool_choice: None,
        },
    }
}

/// A request for the client's roots.
pub fn roots() -> InputRequest {
    InputRequest::ListRoots { params: None }
}

/// What the user did with a form.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FormAnswer<'a> {
    /// Not answered (yet), or answered with something that is not a form answer.
    Missing,
    /// Accepted, with the submitted values (empty when none were sent).
    Accepted(&'a JsonObject),
    /// Declined or cancelled.
    Refused,
}

impl<'a> FormAnswer<'a> {
    /// A submitted string field.
    pub fn text(&self, field: &str) -> Option<&'a str> {
        match self {
            Self::Accepted(content) => content.get(field).and_then(Value::as_str),
            _ => None,
        }
    }

    /// A submitted boolean field.
    pub fn flag(&self, field: &str) -> Option<bool> {
        match self {
            Self::Accepted(content) => content.get(field).and_then(Value::as_bool),
            _ => None,
        }
    }
}

static EMPTY: std::sync::LazyLock<JsonObject> = std::sync::LazyLock::new(JsonObject::new);

/// The answer to the form asked under `key`.
pub fn form_answer<'a>(answers: &'a InputResponses, key: &str) -> FormAnswer<'a> {
    match answers.get(key) {
        Some(InputResponse::Elicitation(r)) if r.action == ElicitAction::Accept => {
            FormAnswer::Accepted(r.content.as_ref().unwrap_or(&EMPTY))
        }
        Some(InputResponse::Elicitation(_)) => FormAnswer::Refused,
        _ => FormAnswer::Missing,
    }
}

/// The text the client's model answered under `key` (its text blocks, joined).
pub fn sampled_text(answers: &InputResponses, key: &str) -> Option<String> {
    let Some(InputResponse::Sampling(result)) = answers.get(key) else { return None };
    let blocks = match &result.content {
        SamplingContent::One(block) => std::slice::from_ref(block),
        SamplingContent::Many(blocks) => blocks.as_slice(),
    };
    let text: Vec<&str> = blocks
        .iter()
        .filter_map(|b| match b {
            SamplingBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect();
    Some(text.join("\n"))
}

/// The roots the client answered under `key`.
pub fn roots_answer<'a>(answers: &'a InputResponses, key: &str) -> Option<&'a [Root]> {
    match answers.get(key) {
        Some(InputResponse::ListRoots(r)) => Some(&r.roots),
        _ => None,
    }
}
