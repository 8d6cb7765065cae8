//! Demo tools that ask for input in the middle of a call: a work-item update whose questions
//! depend on earlier answers (several rounds, state carried along), a confirmation before a
//! destructive action, and a summary written by the client's own model (sampling).
//!
//! The data they act on is simulated (derived from the arguments), so any replica computes
//! the same thing; what they show is the conversation shape, not a database.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::tool::{CallToolResult, ToolAnnotations};

use crate::catalog::ask::{self, FormAnswer, form_answer, sampled_text};
use crate::catalog::{
    CatalogBuilder, Failure, FnTool, Outcome, TaskPolicy, ToolCall, ToolContext, ToolDescriptor, decode_args,
};

/// Registers the interactive demo tools.
pub(super) fn install(b: &mut CatalogBuilder) {
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "update_work_item",
            "Change one field of a work item; asks which field, then the new value, then (when closing it) how it \
             was resolved.",
            json!({"type": "object", "properties": {"id": {"type": "string", "description": "Work item id, e.g. WI-42"}}, "required": ["id"]}),
        )
        .title("Update a work item"),
        update_work_item,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "delete_records",
            "Delete old records from a table, after the user confirms.",
            json!({"type": "object", "properties": {
                "table": {"type": "string", "description": "Table name"},
                "older_than_days": {"type": "integer", "minimum": 1, "description": "Age of the records to delete"}
            }, "required": ["table", "older_than_days"]}),
        )
        .title("Delete records")
        .annotations(ToolAnnotations { destructive_hint: Some(true), ..Default::default() })
        .task_policy(TaskPolicy::Optional),
        delete_records,
    ));
    b.tool(FnTool::new(
        ToolDescriptor::new(
            "summarize_text",
            "Summarize a text in one sentence, written by the client's own model (needs sampling).",
            json!({"type": "object", "properties": {"text": {"type": "string", "description": "The text to summarize"}}, "required": ["text"]}),
        )
        .title("Summarize with your model"),
        summarize_text,
    ));
}

fn text(text: impl Into<String>) -> Outcome<CallToolResult> {
    Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
}

fn one(key: &str, request: mcpgate_protocol::input::InputRequest) -> InputRequests {
    InputRequests::from([(key.to_owned(), request)])
}

/// A work item as "loaded" in the first round; carried in the continuation state so later
/// rounds work on the same snapshot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct WorkItem {
    id: String,
    title: String,
    status: String,
    assignee: String,
}

impl WorkItem {
    fn load(id: &str) -> Self {
        Self {
            id: id.to_owned(),
            title: format!("Investigate {id}"),
            status: "open".to_owned(),
            assignee: "unassigned".to_owned(),
        }
    }

    fn get(&self, field: &str) -> &str {
        match field {
            "title" => &self.title,
            "status" => &self.status,
            _ => &self.assignee,
        }
    }
}

const FIELDS: [&str; 3] = ["title", "status", "assignee"];
const STATUSES: [&str; 3] = ["open", "in_progress", "done"];

fn update_work_item(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    #[derive(Deserialize)]
    struct Args {
        id: String,
    }
    let args = match decode_args::<Args>(&call.arguments) {
        Ok(a) => a,
        Err(e) => return Outcome::Failed(e),
    };
    // Round one loads the item; later rounds reuse the snapshot from the state.
    let item = call
        .state
        .as_ref()
        .and_then(|s| serde_json::from_value::<WorkItem>(s.get("item")?.clone()).ok())
        .filter(|item| item.id == args.id)
        .unwrap_or_else(|| WorkItem::load(&args.id));
    let state = json!({"item": item});
    let answers = &call.input_responses;

    let field = match form_answer(answers, "field") {
        FormAnswer::Missing => {
            let schema = json!({"type": "object", "properties": {
                "field": {"type": "string", "enum": FIELDS, "description": "The field to change"}
            }, "required": ["field"]});
            let question = format!("Which field of {} (\"{}\") do you want to change?", item.id, item.title);
            return Outcome::NeedInput { requests: one("field", ask::form(&question, schema)), state: Some(state) };
        }
        FormAnswer::Refused => return text(format!("No change made to {}.", item.id)),
        answer => match answer.text("field").filter(|f| FIELDS.contains(f)) {
            Some(field) => field.to_owned(),
            None => {
                return Outcome::Failed(Failure::InvalidArguments(
                    "field must be title, status or assignee".to_owned(),
                ));
            }
        },
    };

    let value = match form_answer(answers, "value") {
        FormAnswer::Missing => {
            let property = match field.as_str() {
                "status" => json!({"type": "string", "enum": STATUSES}),
                "title" => json!({"type": "string", "minLength": 1}),
                _ => json!({"type": "string", "description": "Who should own it"}),
            };
            let schema = json!({"type": "object", "properties": {"value": property}, "required": ["value"]});
            let question = format!("New {field} for {} (now: {})?", item.id, item.get(&field));
            return Outcome::NeedInput { requests: one("value", ask::form(&question, schema)), state: Some(state) };
        }
        FormAnswer::Refused => return text(format!("No change made to {}.", item.id)),
        answer => match answer.text("value") {
            Some(v) if !v.is_empty() && (field != "status" || STATUSES.contains(&v)) => v.to_owned(),
            _ => return Outcome::Failed(Failure::InvalidArguments(format!("not a valid {field}"))),
        },
    };

    // Closing an item needs one more answer.
    let resolution = if field == "status" && value == "done" {
        match form_answer(answers, "resolution") {
            FormAnswer::Missing => {
                let schema = json!({"type": "object", "properties": {
                    "resolution": {"type": "string", "enum": ["fixed", "won't fix", "duplicate"]}
                }, "required": ["resolution"]});
                let question = format!("How was {} resolved?", item.id);
                return Outcome::NeedInput {
                    requests: one("resolution", ask::form(&question, schema)),
                    state: Some(state),
                };
            }
            FormAnswer::Refused => return text(format!("No change made to {}.", item.id)),
            answer => answer.text("resolution").map(str::to_owned),
        }
    } else {
        None
    };

    let mut summary = format!("Work item {} updated: {field} {:?} → {value:?}", item.id, item.get(&field));
    if let Some(resolution) = resolution {
        summary.push_str(&format!(" (resolution: {resolution})"));
    }
    text(summary)
}

fn delete_records(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    #[derive(Deserialize)]
    struct Args {
        table: String,
        older_than_days: u32,
    }
    let args = match decode_args::<Args>(&call.arguments) {
        Ok(a) if a.older_than_days >= 1 && !a.table.is_empty() => a,
        Ok(_) => {
            return Outcome::Failed(Failure::InvalidArguments(
                "table must be named and older_than_days ≥ 1".to_owned(),
            ));
        }
        Err(e) => return Outcome::Failed(e),
    };
    // A stand-in for a COUNT(*): the same answer on every replica.
    let count = args.table.bytes().map(u64::from).sum::<u64>() % 900 + 100 + u64::from(args.older_than_days);
    // The question is marked in the continuation: a confirmation counts only if it answers a
    // question this server asked (a client cannot pre-answer it on its first call).
    let asked = json!({"asked": "confirm", "count": count});
    let answer = if call.state.as_ref() == Some(&asked) {
        form_answer(&call.input_responses, "confirm")
    } else {
        FormAnswer::Missing
    };
    match answer {
        FormAnswer::Missing => {
            let question = format!(
                "Delete {count} records older than {} days from {}? This cannot be undone.",
                args.older_than_days, args.table
            );
            Outcome::NeedInput {
                requests: one("confirm", ask::form_field(&question, "confirm", "boolean")),
                state: Some(asked),
            }
        }
        answer if answer.flag("confirm") == Some(true) => {
            text(format!("Deleted {count} records older than {} days from {}.", args.older_than_days, args.table))
        }
        _ => text(format!("Nothing deleted from {}.", args.table)),
    }
}

fn summarize_text(call: &ToolCall, _: &ToolContext) -> Outcome<CallToolResult> {
    let Some(source) = call.arguments.get("text").and_then(Value::as_str).filter(|t| !t.trim().is_empty()) else {
        return Outcome::Failed(Failure::InvalidArguments("text is required".to_owned()));
    };
    match sampled_text(&call.input_responses, "summary") {
        None => {
            let prompt = format!("Summarize the following text in one sentence:\n\n{source}");
            Outcome::NeedInput { requests: one("summary", ask::sample(&prompt, 200)), state: None }
        }
        Some(summary) => text(format!("Summary: {}", summary.trim())),
    }
}
