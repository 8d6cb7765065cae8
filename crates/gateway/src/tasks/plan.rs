//! What a caller asks of a task before it exists: the call it runs, the lifetime it asked for,
//! and what it brings from rounds of input gathered before it could start.
//!
//! Invariant: a plan holds the client's request as given; the lifetime is clamped to the
//! configured bounds only when the task's record is made (`TaskService::create`).

use serde_json::Value;

use mcpgate_protocol::input::InputResponses;

use crate::error::GatewayError;

/// The lifetime a client asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TtlRequest {
    /// None given: the configured default.
    Default,
    /// This many milliseconds (clamped).
    Millis(u64),
    /// `ttl: null`: unlimited, if allowed.
    Unlimited,
}

impl TtlRequest {
    /// Reads a legacy `params.task` value.
    pub(crate) fn from_legacy(task: &Value) -> Result<Self, GatewayError> {
        match task.get("ttl") {
            None => Ok(Self::Default),
            Some(Value::Null) => Ok(Self::Unlimited),
            Some(v) => v
                .as_u64()
                .map(Self::Millis)
                .ok_or_else(|| GatewayError::invalid_params("task.ttl must be a non-negative integer")),
        }
    }
}

/// A task to create for a `tools/call`.
#[derive(Debug)]
pub(crate) struct TaskPlan {
    /// The tool.
    pub tool: String,
    /// The arguments (a JSON object).
    pub arguments: Value,
    /// The lifetime asked for.
    pub ttl: TtlRequest,
    /// Answers gathered before the task could start (multi-round input), for its first run.
    pub answers: InputResponses,
    /// The tool's continuation from those rounds.
    pub state: Option<Value>,
    /// Whether the task keeps the caller's token for its runs (see
    /// [`super::TaskService::keeps_credential`]).
    pub keeps_credential: bool,
}
