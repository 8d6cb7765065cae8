//! Task transitions as they happen on this replica, for whoever keeps a trail of them (the
//! gateway's audit log): created, working (a run starts or resumes), input_required,
//! completed, failed, cancelled, expired.
//!
//! Invariant: a transition is reported once, by the replica whose store call made it (the
//! script that answered `Done`), never for a write that lost a race (already terminal, lease
//! superseded); reporting never blocks and never fails the transition itself.

use std::fmt;

use mcpgate_protocol::Era;
use mcpgate_store::TaskRecord;

/// What happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskTransition {
    /// Created (durably).
    Created,
    /// A run started, or resumed after input or a takeover.
    Working,
    /// The tool asked for input; the task waits for answers.
    InputRequired,
    /// Ended with a tool result (`tool_error`: the result has `isError: true`).
    Completed {
        /// The result is a tool error.
        tool_error: bool,
    },
    /// Ended with a JSON-RPC error (a protocol error, or no attempt finished).
    Failed,
    /// Cancelled by its owner.
    Cancelled,
    /// Found past its lifetime (queued, running or finishing).
    Expired,
}

impl TaskTransition {
    /// The stable name of the transition (the task status it enters).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Created => "created",
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed { .. } => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Expired => "expired",
        }
    }
}

/// One transition of one task, borrowed from what the reporter holds.
#[derive(Debug, Clone, Copy)]
pub struct TransitionNote<'a> {
    /// The task's id.
    pub task_id: &'a str,
    /// Its creator's issuer ("" when the reporter no longer has the record).
    pub issuer: &'a str,
    /// Its creator's subject ("" likewise).
    pub subject: &'a str,
    /// Its tool ("" likewise).
    pub tool: &'a str,
    /// The era it was created in, when known.
    pub era: Option<Era>,
    /// The virtual server it was created through ("" for the root, or when unknown).
    pub server: &'a str,
    /// When it was created (Unix ms, store clock), when known.
    pub created_ms: Option<u64>,
    /// What happened.
    pub transition: TaskTransition,
}

impl<'a> TransitionNote<'a> {
    /// A transition of the task `record`.
    pub fn of(record: &'a TaskRecord, transition: TaskTransition) -> Self {
        Self {
            task_id: record.id.as_str(),
            issuer: &record.issuer,
            subject: &record.subject,
            tool: &record.tool,
            era: Some(record.era),
            server: record.server.as_deref().unwrap_or(""),
            created_ms: Some(record.created_ms),
            transition,
        }
    }

    /// A transition of a task known only by its id (and perhaps its tool).
    pub fn bare(task_id: &'a str, tool: &'a str, transition: TaskTransition) -> Self {
        Self { task_id, issuer: "", subject: "", tool, era: None, server: "", created_ms: None, transition }
    }
}

/// Receives the transitions of this replica. Must return at once (hand the note to a queue).
pub trait TransitionObserver: Send + Sync + fmt::Debug {
    /// One transition.
    fn transition(&self, note: &TransitionNote<'_>);
}
