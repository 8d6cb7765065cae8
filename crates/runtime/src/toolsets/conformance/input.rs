//! Conformance fixtures for multi-round input (`input-required-result-*`, SEP-2322): tools
//! and a prompt that ask the user, the client's model or the client's roots, over one or
//! several rounds, and only for what the request's capabilities allow.
//!
//! None of them keeps anything between rounds itself: answers from earlier rounds come back
//! with the retry (the gateway carries them in the sealed `requestState`), and where a
//! fixture must prove a state round trip it returns a continuation `state` and checks it.

use serde_json::{Value, json};

use mcpgate_protocol::capabilities::{ClientCapabilities, SamplingCapability};
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::input::{InputRequest, InputRequests};
use mcpgate_protocol::prompt::{GetPromptResult, Prompt, PromptMessage};
use mcpgate_protocol::tool::CallToolResult;

use crate::catalog::ask::{self, FormAnswer, form_answer, roots_answer, sampled_text};
use crate::catalog::{CatalogBuilder, Failure, FnPrompt, FnTool, Outcome, ToolCall, ToolContext, ToolDescriptor};

fn no_args() -> Value {
    json!({"type": "object", "properties": {}})
}

fn text(text: impl Into<String>) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn ask(
    requests: impl IntoIterator<Item = (&'static str, InputRequest)>,
    state: Option<Value>,
) -> Outcome<CallToolResult> {
    Outcome::NeedInput { requests: requests.into_iter().map(|(k, r)| (k.to_owned(), r)).collect(), state }
}

fn name_form() -> InputRequest {
    ask::form_field("What is your name?", "name", "string")
}

fn capital_question() -> InputRequest {
    ask::sample("What is the capital of France?", 100)
}

pub(super) fn install(b: &mut CatalogBuilder) {
    let tool = |name: &str, description: &str, f: fn(&ToolCall, &ToolContext) -> Outcome<CallToolResult>| {
        FnTool::new(ToolDescriptor::new(name, description, no_args()), f)
    };
    b.tool(tool(
        "test_input_required_result_elicitation",
        "Asks the user for their name, then greets them.",
        elicitation,
    ));
    b.tool(tool("test_input_required_result_sampling", "Asks the client's model a question.", sampling));
    b.tool(tool("test_input_required_result_list_roots", "Asks for the client's roots.", list_roots));
    b.tool(tool(
        "test_input_required_result_request_state",
        "Asks for a confirmation and checks its continuation state comes back.",
        request_state,
    ));
    b.tool(tool(
        "test_input_required_result_multiple_inputs",
        "Asks the user, the client's model and the client's roots at once.",
        multiple_inputs,
    ));
    b.tool(tool(
        "test_input_required_result_multi_round",
        "Asks for a name, then a colour, in two rounds.",
        multi_round,
    ));
    b.tool(tool(
        "test_input_required_result_tampered_state",
        "Asks for a confirmation; its state must come back untouched.",
        request_state,
    ));
    b.tool(tool(
        "test_input_required_result_capabilities",
        "Asks only for what the client declared it can answer.",
        capabilities,
    ));
    b.prompt(FnPrompt::new(
        Prompt {
            name: "test_input_required_result_prompt".to_owned(),
            title: None,
            description: Some("Asks the user for context before rendering.".to_owned()),
            arguments: None,
            icons: None,
            meta: None,
        },
        prompt,
    ));
}

fn elicitation(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    match form_answer(&call.input_responses, "user_name") {
        FormAnswer::Missing => ask([("user_name", name_form())], None),
        answer @ FormAnswer::Accepted(_) => text(format!("Hello, {}!", answer.text("name").unwrap_or("stranger"))),
        FormAnswer::Refused => text("Hello, whoever you are!"),
    }
}

fn sampling(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    match sampled_text(&call.input_responses, "capital_question") {
        None => ask([("capital_question", capital_question())], None),
        Some(answer) => text(format!("The model answered: {answer}")),
    }
}

fn list_roots(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    match roots_answer(&call.input_responses, "client_roots") {
        None => ask([("client_roots", ask::roots())], None),
        Some(roots) => {
            let uris: Vec<&str> = roots.iter().map(|r| r.uri.as_str()).collect();
            text(format!("Received {} root(s): {}", roots.len(), uris.join(", ")))
        }
    }
}

/// The continuation this fixture hands out and expects back.
fn expected_state() -> Value {
    json!({"fixture": "request_state", "step": "confirm"})
}

fn request_state(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let state_ok = call.state.as_ref() == Some(&expected_state());
    match form_answer(&call.input_responses, "confirm") {
        FormAnswer::Accepted(_) if state_ok => text("Confirmed: state-ok"),
        FormAnswer::Refused if state_ok => text("Not confirmed: state-ok"),
        // No answer yet, or an answer without the state it belongs to: ask (again).
        _ => {
            ask([("confirm", ask::form_field("Please confirm to continue.", "ok", "boolean"))], Some(expected_state()))
        }
    }
}

fn multiple_inputs(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let answers = &call.input_responses;
    let mut missing = InputRequests::new();
    if form_answer(answers, "user_name") == FormAnswer::Missing {
        missing.insert("user_name".to_owned(), name_form());
    }
    if sampled_text(answers, "greeting").is_none() {
        missing.insert("greeting".to_owned(), ask::sample("Generate a greeting", 50));
    }
    if roots_answer(answers, "client_roots").is_none() {
        missing.insert("client_roots".to_owned(), ask::roots());
    }
    if !missing.is_empty() {
        return Outcome::NeedInput { requests: missing, state: None };
    }
    let name = form_answer(answers, "user_name").text("name").unwrap_or("stranger").to_owned();
    let greeting = sampled_text(answers, "greeting").unwrap_or_default();
    let roots = roots_answer(answers, "client_roots").map_or(0, <[_]>::len);
    text(format!("{greeting} {name} ({roots} root(s))"))
}

fn multi_round(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let answers = &call.input_responses;
    let name = match form_answer(answers, "step1") {
        FormAnswer::Missing => return ask([("step1", name_form())], Some(json!({"round": 1}))),
        answer => answer.text("name").unwrap_or("stranger").to_owned(),
    };
    match form_answer(answers, "step2") {
        FormAnswer::Missing => ask(
            [("step2", ask::form_field(&format!("{name}, what is your favourite colour?"), "color", "string"))],
            Some(json!({"round": 2})),
        ),
        answer => text(format!("{name} likes {}", answer.text("color").unwrap_or("no colour in particular"))),
    }
}

fn capabilities(call: &ToolCall, cx: &ToolContext) -> Outcome<CallToolResult> {
    let caps = cx.capabilities();
    let answers = &call.input_responses;
    if caps.elicitation_form() {
        return match form_answer(answers, "user_name") {
            FormAnswer::Missing => ask([("user_name", name_form())], None),
            answer => text(format!("Hello, {}!", answer.text("name").unwrap_or("stranger"))),
        };
    }
    if caps.sampling.is_some() {
        return match sampled_text(answers, "capital_question") {
            None => ask([("capital_question", capital_question())], None),
            Some(answer) => text(format!("The model answered: {answer}")),
        };
    }
    if caps.roots.is_some() {
        return match roots_answer(answers, "client_roots") {
            None => ask([("client_roots", ask::roots())], None),
            Some(roots) => text(format!("Received {} root(s)", roots.len())),
        };
    }
    Outcome::Failed(Failure::MissingCapability {
        required: Box::new(ClientCapabilities { sampling: Some(SamplingCapability::default()), ..Default::default() }),
        message: "test_input_required_result_capabilities needs elicitation, sampling or roots".to_owned(),
    })
}

fn prompt(call: &ToolCall, _: &ToolContext) -> Outcome<GetPromptResult> {
    match form_answer(&call.input_responses, "user_context") {
        FormAnswer::Missing => Outcome::NeedInput {
            requests: InputRequests::from([(
                "user_context".to_owned(),
                ask::form_field("What context should the prompt use?", "context", "string"),
            )]),
            state: None,
        },
        answer => Outcome::Complete(GetPromptResult {
            messages: vec![PromptMessage::user(ContentBlock::text(format!(
                "Answer with this context in mind: {}",
                answer.text("context").unwrap_or("none given")
            )))],
            ..Default::default()
        }),
    }
}
