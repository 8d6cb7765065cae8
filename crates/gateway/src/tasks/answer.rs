//! What a `tools/call` that becomes a task answers: the task (`CreateTaskResult`), or, for a
//! 2026-07-28 call whose task started on this replica and completed within
//! `tasks.answer_within_ms`, the task's result, as the digest allows ("a server may instead
//! return a plain `CallToolResult` for a task-capable tool when it finishes quickly"), with
//! the task's id in `_meta["io.mcpgate/taskId"]` (the audit trail links the call to it).
//!
//! Invariants: the task is created durably before its tool runs, whatever the answer, and is
//! never removed for having been answered inline (an idempotent retry, the admin API and the
//! audit trail find it); the wait is bounded by the window and reads nothing from the store
//! (the worker's local signal, sent once the outcome is stored, so the answer is what any
//! later read finds); the run does not depend on the wait (a client that leaves, or a window
//! that passes, leaves the task running); a 2025-11-25 call always gets its task (the client
//! asked for one), and so does a task that runs elsewhere (enqueued: no free slot here) or was
//! found again by an idempotent retry (its outcome, if any, is read with `tasks/get`).

use std::time::Duration;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::task_metrics::TaskMetric;
use mcpgate_runtime::worker::RunEnd;
use mcpgate_store::{TaskId, TaskRecord};

use super::{TaskPlan, TaskService};
use crate::call_context::CallContext;
use crate::error::GatewayError;

/// What a call that became a task answers.
#[derive(Debug)]
pub(crate) enum CallAnswer {
    /// The task (`CreateTaskResult`): still running, waiting for input, failed, or not run
    /// here.
    Task(Box<TaskRecord>),
    /// The task completed within the window with this result (as stored: the reply adds
    /// its era's envelope, and the task's id, so the call stays linked to its task).
    Result {
        /// The task answered for.
        task: TaskId,
        /// Its result.
        result: Box<CallToolResult>,
    },
}

impl TaskService {
    /// Creates the planned task ([`Self::create`]) and, for a 2026-07-28 call whose task
    /// runs here, waits up to `tasks.answer_within_ms` for its run to end (see the module
    /// docs). A task that asks for input within the window is answered at once, as a task in
    /// `input_required` (its client must poll to see the questions); one that failed, as a
    /// task in `failed`: its error is read with `tasks/get`, never mistaken for a call
    /// refused before anything ran (a `-32021` from inside a run, say, would read as "send
    /// it again with the capability" although the tool ran).
    pub(crate) async fn create_for_call(&self, cx: &CallContext, plan: TaskPlan) -> Result<CallAnswer, GatewayError> {
        let (mut record, run) = self.create_here(cx, plan).await?;
        tracing::Span::current().record("task", record.id.as_str());
        let window = self.settings.tasks.answer_within_ms;
        let Some(run) = run.filter(|_| cx.era == Era::Modern && window > 0) else {
            return Ok(CallAnswer::Task(Box::new(record)));
        };
        match tokio::time::timeout(Duration::from_millis(window), run.ended()).await {
            Ok(Some(RunEnd::Completed(result))) => {
                self.metrics().count(&record.tool, TaskMetric::AnsweredInline);
                tracing::debug!("task ended within the answer window; answered with its result");
                Ok(CallAnswer::Result { task: record.id, result })
            }
            Ok(Some(RunEnd::Failed(_))) => {
                record.status = TaskStatus::Failed;
                Ok(CallAnswer::Task(Box::new(record)))
            }
            Ok(Some(RunEnd::Parked)) => {
                record.status = TaskStatus::InputRequired;
                Ok(CallAnswer::Task(Box::new(record)))
            }
            // The window passed, or the run ended without recording an outcome here (handed
            // back, its lease lost): the task answers for itself.
            Ok(None) | Err(_) => Ok(CallAnswer::Task(Box::new(record))),
        }
    }
}
