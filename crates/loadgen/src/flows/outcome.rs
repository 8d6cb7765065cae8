//! How a flow ended (`Failure`, `Done`), and the checks that tell a right answer from a
//! wrong one, a missing task from a stuck one, and a task that failed visibly from a loss.

use std::time::Duration;

use serde_json::Value;

use crate::mcp::CallError;
use crate::options::Scenario;

/// How a flow failed.
#[derive(Debug, Clone)]
pub(crate) enum Failure {
    /// A request failed for good.
    Call(CallError),
    /// The server answered, but not with what this call should get.
    Wrong(String),
    /// A task whose id the client got back was later answered "task not found".
    Missing(String),
    /// A task whose id the client got back was not terminal by the deadline.
    Stuck(String),
    /// A task id was handed to two different calls.
    Duplicate(String),
    /// A task whose id the client got back ended `failed`, visibly (with the task's error
    /// message): not a wrong answer, and no loss (e.g. a run a failover interrupted whose tool
    /// may not run twice).
    TaskFailed(String),
}

impl Failure {
    pub(crate) fn kind(&self) -> String {
        match self {
            Self::Call(e) => e.kind(),
            Self::Wrong(_) => "wrong".to_owned(),
            Self::Missing(_) => "acknowledged_missing".to_owned(),
            Self::Stuck(_) => "stuck".to_owned(),
            Self::Duplicate(_) => "duplicate".to_owned(),
            Self::TaskFailed(_) => "task_failed".to_owned(),
        }
    }
}

/// One finished flow.
#[derive(Debug)]
pub(crate) struct Done {
    pub(crate) scenario: Scenario,
    pub(crate) elapsed: Duration,
    pub(crate) outcome: Result<(), Failure>,
    /// Failures that a retry got past.
    pub(crate) retried: u32,
    /// Whether the flow created a task (so it counts in created/ended).
    pub(crate) created_task: bool,
    /// Whether the server answered the task's creation with its result (2026-07-28: a task
    /// that ended within the server's answer window): a whole lifecycle in one request.
    pub(crate) answered_inline: bool,
}

/// A request about an acknowledged task that failed for good: "task not found" means the
/// task is missing; a transient failure that outlasted the deadline means it is stuck.
pub(super) fn acknowledged(task: &str, failure: Failure) -> Failure {
    match failure {
        Failure::Call(CallError::Rpc { code: -32602, message, .. })
            if message.to_ascii_lowercase().contains("not found") =>
        {
            Failure::Missing(format!("task {task} was acknowledged, then not found: {message}"))
        }
        Failure::Call(e) if e.transient() => {
            Failure::Stuck(format!("task {task}: no answer within the deadline ({e})"))
        }
        other => other,
    }
}

/// A terminal task read back: completed, or a visible failure (`failed`, with its error), or
/// a wrong answer.
pub(super) fn ended_completed(task: &str, done: &Value) -> Result<(), Failure> {
    match done["status"].as_str() {
        Some("completed") => Ok(()),
        Some("failed") => Err(task_failed(task, &done["error"]["message"])),
        _ => Err(Failure::Wrong(format!("task {task} ended {}", done["status"]))),
    }
}

/// `task` ended `failed` with `message` (the task's error).
pub(super) fn task_failed(task: &str, message: &Value) -> Failure {
    Failure::TaskFailed(format!("task {task} failed: {}", message.as_str().unwrap_or("(no message)")))
}

/// `delete_records` confirmed: "Deleted N records older than D days from TABLE."
pub(super) fn expect_deleted(result: &Value, table: &str) -> Result<(), Failure> {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    if text.starts_with("Deleted ") && text.ends_with(&format!("from {table}.")) {
        Ok(())
    } else {
        Err(Failure::Wrong(format!("delete_records said {result}")))
    }
}

pub(super) fn expect_text(result: &Value, expected: &str) -> Result<(), Failure> {
    match result["content"][0]["text"].as_str() {
        Some(text) if text == expected => Ok(()),
        _ => Err(Failure::Wrong(format!("expected {expected:?}, got {result}"))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn rpc(code: i64, message: &str, status: u16) -> Failure {
        Failure::Call(CallError::Rpc { code, message: message.to_owned(), status })
    }

    #[test]
    fn an_acknowledged_task_is_missing_when_not_found_and_stuck_when_unreachable() {
        let kind = |f: Failure| acknowledged("t-1", f).kind();
        assert_eq!(kind(rpc(-32602, "Invalid params: task not found: t-1", 200)), "acknowledged_missing");
        assert_eq!(kind(rpc(-32603, "Internal error: task store unavailable, retry shortly", 503)), "stuck");
        assert_eq!(kind(Failure::Call(CallError::Transport("connection refused".to_owned()))), "stuck");
        // Other invalid params (e.g. an answer that does not fit) are what they are.
        assert_eq!(kind(rpc(-32602, "Invalid params: confirm must be a form answer", 200)), "rpc_-32602");
        assert_eq!(kind(Failure::Wrong("x".to_owned())), "wrong");
    }

    #[test]
    fn a_task_that_failed_is_told_from_a_wrong_answer() {
        let failed = json!({"status": "failed", "error": {"code": -32603, "message": "Task interrupted: stopped"}});
        let Err(failure) = ended_completed("t-1", &failed) else { panic!("a failed task is no success") };
        assert_eq!(failure.kind(), "task_failed");
        assert!(describe_failure(&failure).contains("Task interrupted: stopped"), "{failure:?}");
        let Err(failure) = ended_completed("t-1", &json!({"status": "cancelled"})) else { panic!("not completed") };
        assert_eq!(failure.kind(), "wrong");
        assert!(ended_completed("t-1", &json!({"status": "completed", "result": {}})).is_ok());
    }

    fn describe_failure(failure: &Failure) -> String {
        match failure {
            Failure::TaskFailed(s) | Failure::Wrong(s) => s.clone(),
            other => format!("{other:?}"),
        }
    }
}
