//! The audit of one request that reaches a tool, prompt or resource: opened once the request
//! is admitted (who, what, which era), closed once with how it ended.
//!
//! Invariants: a request is written at most once (closing consumes it; one that is dropped
//! unclosed, e.g. because its work was never started, writes nothing); what ends up in the
//! line of a result is its kind (ok, tool error, input required, a task and its id), never its
//! content.

use std::sync::Arc;

use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use mcpgate_protocol::{Era, Method};

use super::Trail;
use super::decision::PolicyDecision;
use super::event::{AuditEvent, PrincipalField};
use crate::error::GatewayError;

/// An open request audit.
#[derive(Debug)]
pub(crate) struct RequestAudit {
    pub(super) trail: Arc<Trail>,
    pub(super) started: Instant,
    pub(super) method: Method,
    pub(super) era: Era,
    pub(super) issuer: String,
    pub(super) subject: String,
    /// The virtual server (`""`: the root endpoint).
    pub(super) server: String,
    pub(super) name: String,
    pub(super) upstream: Option<String>,
    pub(super) arguments: Option<Value>,
    pub(super) policy: PolicyDecision,
}

/// How a request ended, as far as the trail tells.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    /// A result: `ok`, `tool_error`, `input_required`, or `task` (with its id).
    Result { outcome: &'static str, task_id: Option<String> },
    /// A JSON-RPC error.
    Error { code: i64 },
    /// The client left, or the replica shut down, before it ended.
    Cancelled,
}

impl RequestAudit {
    /// Closes the audit with the serialized result `result`.
    pub(crate) fn result(self, result: &[u8]) {
        let ended = classify(result);
        self.close(ended);
    }

    /// Closes the audit with an error.
    pub(crate) fn error(mut self, error: &GatewayError) {
        let code = i64::from(error.wire(Some(self.era)).error.code.0);
        if let Some(denied) = PolicyDecision::of_error(error) {
            self.policy = denied;
        }
        self.close(Ended::Error { code });
    }

    /// Closes the audit: the request was cut off before it ended.
    pub(crate) fn cancelled(self) {
        self.close(Ended::Cancelled);
    }

    fn close(self, ended: Ended) {
        let duration = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let (outcome, error_code, task_id) = match &ended {
            Ended::Result { outcome, task_id } => (*outcome, None, task_id.as_deref()),
            Ended::Error { code } => ("error", Some(*code), None),
            Ended::Cancelled => ("cancelled", None, None),
        };
        let mut event = AuditEvent {
            time: crate::time::iso8601(crate::time::now_ms()),
            event: self.method.as_str(),
            principal: PrincipalField { iss: &self.issuer, sub: &self.subject },
            server: &self.server,
            upstream: self.upstream.as_deref(),
            name: &self.name,
            era: Some(self.era.as_str()),
            outcome,
            error_code,
            duration_ms: Some(duration),
            task_id,
            policy: Some(self.policy.as_str()),
            policy_rule: self.policy.rule(),
            replica: &self.trail.replica,
            arguments: self.arguments.as_ref(),
            arguments_truncated: false,
        };
        self.trail.emit(&mut event);
    }
}

/// The parts of a result the trail looks at; everything else is skipped unread.
#[derive(Deserialize)]
struct Peek {
    #[serde(rename = "isError", default)]
    is_error: Option<bool>,
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
    /// 2026-07-28 `CreateTaskResult` (flat).
    #[serde(rename = "taskId", default)]
    task_id: Option<String>,
    /// 2025-11-25 `CreateTaskResult`.
    #[serde(default)]
    task: Option<PeekTask>,
    /// A 2026-07-28 call answered with the result of the task it created.
    #[serde(rename = "_meta", default)]
    meta: Option<PeekMeta>,
}

#[derive(Deserialize)]
struct PeekMeta {
    #[serde(rename = "io.mcpgate/taskId", default)]
    task_id: Option<String>,
}

#[derive(Deserialize)]
struct PeekTask {
    #[serde(rename = "taskId")]
    task_id: String,
}

/// What kind of result `result` is.
fn classify(result: &[u8]) -> Ended {
    let Ok(peek) = serde_json::from_slice::<Peek>(result) else {
        return Ended::Result { outcome: "ok", task_id: None };
    };
    if let Some(task_id) = peek.task_id.or(peek.task.map(|t| t.task_id)) {
        return Ended::Result { outcome: "task", task_id: Some(task_id) };
    }
    let outcome = match peek.result_type.as_deref() {
        Some("input_required") => "input_required",
        _ if peek.is_error == Some(true) => "tool_error",
        _ => "ok",
    };
    Ended::Result { outcome, task_id: peek.meta.and_then(|m| m.task_id) }
}

#[cfg(test)]
mod tests {
    use super::{Ended, classify};

    #[test]
    fn results_are_classified_without_their_content() {
        let ok = |outcome| Ended::Result { outcome, task_id: None };
        assert_eq!(classify(br#"{"content":[{"type":"text","text":"hi"}]}"#), ok("ok"));
        assert_eq!(classify(br#"{"content":[],"isError":true,"resultType":"complete"}"#), ok("tool_error"));
        assert_eq!(classify(br#"{"resultType":"input_required","inputRequests":{}}"#), ok("input_required"));
        let task = |id: &str| Ended::Result { outcome: "task", task_id: Some(id.to_owned()) };
        assert_eq!(classify(br#"{"resultType":"task","taskId":"t01-a","status":"working"}"#), task("t01-a"));
        assert_eq!(classify(br#"{"task":{"taskId":"t02-b","status":"working"}}"#), task("t02-b"));
        assert_eq!(classify(br#"{"messages":[]}"#), ok("ok"));
        let answered = |outcome, id: &str| Ended::Result { outcome, task_id: Some(id.to_owned()) };
        assert_eq!(
            classify(br#"{"content":[],"resultType":"complete","_meta":{"io.mcpgate/taskId":"t03-c"}}"#),
            answered("ok", "t03-c")
        );
        assert_eq!(
            classify(br#"{"content":[],"isError":true,"_meta":{"io.mcpgate/taskId":"t04-d"}}"#),
            answered("tool_error", "t04-d")
        );
    }
}
