//! Background tools for clients that know no tasks: a background tool called by a client that
//! did not ask for a task (no `params.task`, no tasks extension) still runs as a durable task,
//! and the call answers at once with the task id and what to do next; three companion tools
//! let any agent follow it: `task_status`, `task_result` and `task_cancel`. The task is an
//! ordinary one: clients that speak either tasks protocol see the same task.
//!
//! Invariants: the companions see only the caller's own tasks, and through a virtual server
//! only those created through it, as the tasks methods do (another's, another endpoint's,
//! unknown or expired ids all read "not found", indistinguishably, and are never cancelled);
//! they never answer with a protocol error for
//! a task's state (a task still running is a plain result saying so); they are listed only
//! when some tool is a background tool. Their names (`[background]`) never shadow a tool of
//! the toolsets or one added in code (that is a configuration error), and an upstream tool
//! of the same name gives way to them (a background tool is unusable without them).
//! Starting a background call is the `tools/call` handler's (`handlers/background.rs`).

use serde_json::{Value, json};

use mcpgate_protocol::ErrorObject;
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::relayed::RawMembers;
use mcpgate_protocol::task::TaskStatus;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::{
    BoxFuture, CatalogBuilder, Failure, Outcome, Tool, ToolCall, ToolContext, ToolDescriptor,
};
use mcpgate_store::{Cancelled, Read, TaskId, TaskOutcome, TaskRecord};

use crate::config::BackgroundConfig;
use crate::error::{StartupError, clip};
use crate::servers::task_seen_through;
use crate::tasks::TaskBook;

/// Registers the companions when some tool is a background tool. `fixed` says whether a
/// name belongs to a toolset's tool or one added in code: taking such a name is an error
/// naming the setting to change; an upstream tool of that name is left out instead.
pub(crate) fn register(
    builder: &mut CatalogBuilder,
    book: &TaskBook,
    names: &BackgroundConfig,
    fixed: impl Fn(&str) -> bool,
) -> Result<(), StartupError> {
    if !builder.has_background() {
        return Ok(());
    }
    let task_id = || {
        json!({"type": "object", "properties": {
            "taskId": {"type": "string", "description": "The taskId a background tool answered with"}
        }, "required": ["taskId"]})
    };
    let result_tool = names.result_tool.as_str();
    for (setting, name, kind, description) in [
        (
            "background.status_tool",
            names.status_tool.as_str(),
            Kind::Status,
            "Where a background task stands: its status, progress (0 to 1), latest message and when to ask again.",
        ),
        (
            "background.result_tool",
            result_tool,
            Kind::Result,
            "A background task's result once it is done (or that it is still running).",
        ),
        ("background.cancel_tool", names.cancel_tool.as_str(), Kind::Cancel, "Stops a background task."),
    ] {
        if fixed(name) {
            return Err(StartupError::config(
                setting.to_owned(),
                format!(
                    "a tool named {name:?} is already served: choose another name for the background-task companion"
                ),
            ));
        }
        if builder.remove_tool(name) {
            tracing::warn!(
                tool = name,
                "an upstream tool of this name is left out: the background-task companion has it"
            );
        }
        let descriptor = ToolDescriptor::new(name, description, task_id()).retry_safe(kind != Kind::Cancel);
        builder.tool(Companion { descriptor, kind, book: book.clone(), result_tool: result_tool.to_owned() });
    }
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Status,
    Result,
    Cancel,
}

struct Companion {
    descriptor: ToolDescriptor,
    kind: Kind,
    /// The caller's tasks (and where a cancel is counted, like every other way of cancelling).
    book: TaskBook,
    /// The result companion's name, which status answers point to.
    result_tool: String,
}

impl Tool for Companion {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let Some(raw) = call.arguments.get("taskId").and_then(Value::as_str) else {
                return Outcome::Failed(Failure::InvalidArguments("taskId (a string) is required".to_owned()));
            };
            let owner = cx.principal().key();
            let not_found = || Outcome::Complete(CallToolResult::error(format!("Task {} not found", clip(raw))));
            let Some(id) = TaskId::parse(raw) else { return not_found() };
            // The store's own error (addresses, OS errors) is for the log, not the client.
            let unavailable = |e: mcpgate_store::StoreError| {
                tracing::warn!(task = %id, error = &e as &dyn std::error::Error, "a background-task companion could not reach the task store");
                Outcome::Failed(Failure::Unavailable("The task store is unavailable; try again shortly".to_owned()))
            };
            // Through a virtual server, a task made elsewhere does not exist (as for the tasks
            // methods): checked before a cancel changes anything, and on every read.
            let seen = |record: &TaskRecord| task_seen_through(cx.server(), record);
            match self.kind {
                Kind::Cancel => {
                    if cx.server().is_some() {
                        match self.book.find(&id, owner, Read::Control).await {
                            Ok(Some(record)) if seen(&record) => {}
                            Ok(_) => return not_found(),
                            Err(e) => return unavailable(e),
                        }
                    }
                    match self.book.cancel(&id, owner).await {
                        Ok(Cancelled::Now(_)) => text(format!("Task {id} cancelled."), None),
                        Ok(Cancelled::AlreadyTerminal(record)) => {
                            text(format!("Task {id} had already ended: {}.", record.status.as_str()), None)
                        }
                        Ok(Cancelled::NotFound) => not_found(),
                        Err(e) => unavailable(e),
                    }
                }
                Kind::Status | Kind::Result => {
                    let read = if self.kind == Kind::Result { Read::WithOutcome } else { Read::Control };
                    match self.book.find(&id, owner, read).await {
                        Ok(Some(record)) if seen(&record) => {
                            if self.kind == Kind::Status {
                                status(&record, &self.result_tool)
                            } else {
                                result(&record, &self.result_tool)
                            }
                        }
                        Ok(_) => not_found(),
                        Err(e) => unavailable(e),
                    }
                }
            }
        })
    }
}

fn text(message: String, structured: Option<Value>) -> Outcome<CallToolResult> {
    let mut result = CallToolResult::success(vec![ContentBlock::text(message)]);
    result.structured_content = structured;
    Outcome::Complete(result)
}

/// `task_status`: status, progress, latest message, when to ask again.
fn status(record: &TaskRecord, result_tool: &str) -> Outcome<CallToolResult> {
    let id = record.id.as_str();
    let status = record.status.as_str();
    let next = match record.status {
        TaskStatus::Completed | TaskStatus::Failed => format!(" Call {result_tool} for its result."),
        TaskStatus::Cancelled => String::new(),
        TaskStatus::InputRequired => {
            " It waits for input, which a client answers through the tasks protocol.".to_owned()
        }
        TaskStatus::Working => format!(" Ask again in {} ms.", record.poll_interval_ms),
    };
    // A finished task is all done whatever it last reported.
    let progress = if record.status == TaskStatus::Completed { Some(1.0) } else { record.progress() };
    let done = progress.map(|p| format!(", {:.0} % done", p * 100.0)).unwrap_or_default();
    let message = record.status_message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default();
    let structured = json!({
        "taskId": id,
        "status": status,
        "progress": progress,
        "message": record.status_message,
        "pollAfterMs": record.poll_interval_ms,
    });
    text(format!("Task {id} is {status}{done}{message}.{next}"), Some(structured))
}

/// `task_result`: the tool's own result once done; otherwise a plain result saying why not.
fn result(record: &TaskRecord, result_tool: &str) -> Outcome<CallToolResult> {
    let id = record.id.as_str();
    match (record.status, &record.outcome) {
        (TaskStatus::Completed, Some(TaskOutcome::Result(json))) => match RawMembers::split(json) {
            Ok(r) => Outcome::Complete(CallToolResult::relayed(r.members, r.is_error)),
            // The stored text was sealed at rest: say where it broke, not what it quotes.
            Err(e) => Outcome::Failed(Failure::Internal(format!(
                "stored result unreadable: {}",
                crate::error::UnquotedJsonError::from(e)
            ))),
        },
        (TaskStatus::Failed, outcome) => {
            let reason = match outcome {
                Some(TaskOutcome::Error(json)) => serde_json::from_str::<ErrorObject>(json).map(|e| e.message).ok(),
                _ => None,
            };
            Outcome::Complete(CallToolResult::error(format!(
                "Task {id} failed: {}",
                reason.unwrap_or_else(|| "no reason recorded".to_owned())
            )))
        }
        (TaskStatus::Cancelled, _) => Outcome::Complete(CallToolResult::error(format!("Task {id} was cancelled."))),
        (status, _) => text(
            format!(
                "Task {id} is still running ({}); call {result_tool} again in {} ms.",
                status.as_str(),
                record.poll_interval_ms
            ),
            Some(json!({ "taskId": id, "status": status.as_str(), "pollAfterMs": record.poll_interval_ms })),
        ),
    }
}
