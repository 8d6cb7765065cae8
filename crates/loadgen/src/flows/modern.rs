//! The 2026-07-28 task flows: a task created by `tools/call` (its creation retried under its
//! idempotency key), polled with `tasks/get` until terminal, answered with `tasks/update`,
//! read back, or cancelled; a creation answered with the result at once is checked as such.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use super::outcome::Failure;
use super::outcome::{acknowledged, ended_completed, expect_deleted, expect_text, task_failed};
use super::retry::{left, retry};
use super::{Client, Shared, acknowledge_key, claim_id};
use crate::mcp::CallError;

/// How long the get scenario's task runs: longer than mcpgate's longest answer window
/// (`tasks.answer_within_ms`, at most 250 ms), so it is a task to read.
const GET_TASK_SECONDS: f64 = 0.3;

/// What a 2026-07-28 task creation answered.
#[derive(Debug)]
enum Creation {
    /// A task to follow: its id, and how often to poll it.
    Task(String, Duration),
    /// The task ended at once and the server answered with its result (`resultType:
    /// "complete"`): nothing to follow.
    Inline(Value),
}

impl Creation {
    /// The task, for flows that need one to follow (an inline answer is a wrong one there).
    fn task(self) -> Result<(String, Duration), Failure> {
        match self {
            Self::Task(task, poll) => Ok((task, poll)),
            Self::Inline(result) => Err(Failure::Wrong(format!("expected a task, got a result: {result}"))),
        }
    }
}

impl Client {
    /// Creates a task with `params`; retried with the same id while failures are transient.
    async fn create_task(
        &mut self,
        shared: &Shared,
        mut params: Value,
        retried: &mut u32,
    ) -> Result<Creation, Failure> {
        let id = self.next_id();
        // A 2026-07-28 request id identifies nothing: a retry after a lost or refused reply
        // (e.g. 503 while Redis fails over) gets the task its first try created only by its
        // idempotency key. The request id is unique in the run, so it serves as the key.
        params["_meta"] = json!({"io.mcpgate/idempotencyKey": id});
        let answer =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), true)).await?;
        let result = &answer.result;
        if result["resultType"] == "complete" {
            return Ok(Creation::Inline(answer.result));
        }
        if result["resultType"] != "task" {
            return Err(Failure::Wrong(format!("expected a task, got {result}")));
        }
        let task = result["taskId"].as_str().ok_or_else(|| Failure::Wrong(format!("no taskId in {result}")))?;
        let poll = shared.poll.unwrap_or(Duration::from_millis(result["pollIntervalMs"].as_u64().unwrap_or(1000)));
        claim_id(shared, task)?;
        Ok(Creation::Task(task.to_owned(), poll))
    }

    /// Polls `tasks/get` until the task is terminal or the deadline passes.
    async fn settle(
        &mut self,
        shared: &Shared,
        task: &str,
        poll: Duration,
        deadline: Instant,
        retried: &mut u32,
    ) -> Result<Value, Failure> {
        self.watch(shared, task, poll, deadline, retried, |_| false).await
    }

    /// Polls `tasks/get` until the task is terminal or its status passes `until`, reading on
    /// through transient failures; "task not found" is a missing task, the deadline a stuck one.
    async fn watch(
        &mut self,
        shared: &Shared,
        task: &str,
        poll: Duration,
        deadline: Instant,
        retried: &mut u32,
        until: impl Fn(&str) -> bool,
    ) -> Result<Value, Failure> {
        loop {
            let id = self.next_id();
            let mut failed = false;
            match shared.mcp.modern(&id, "tasks/get", json!({"taskId": task}), true).await {
                Ok(answer) => {
                    let status = answer.result["status"].as_str().unwrap_or_default();
                    if matches!(status, "completed" | "failed" | "cancelled") || until(status) {
                        return Ok(answer.result);
                    }
                }
                Err(e) if e.transient() => {
                    *retried += 1;
                    failed = true;
                }
                Err(CallError::Rpc { code: -32602, message, .. }) => {
                    return Err(Failure::Missing(format!("task {task} was acknowledged, then not found: {message}")));
                }
                Err(e) => return Err(Failure::Call(e)),
            }
            // The last look is at the deadline itself.
            let remaining = left(deadline);
            if remaining.is_zero() {
                return Err(Failure::Stuck(format!("task {task} not terminal within {:?}", shared.deadline)));
            }
            if failed {
                // A restarting replica refuses at once: do not spin on it.
                tokio::time::sleep(poll.max(Duration::from_millis(50)).min(remaining)).await;
            } else if poll.is_zero() {
                // Back to back (a timer of zero still waits for the timer wheel's next tick).
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(poll.min(remaining)).await;
            }
        }
    }

    /// A task's lifecycle: created, polled until terminal, its result checked; or, when the
    /// server answers the creation with the result (the task ended at once), that result
    /// checked: the lifecycle in one request.
    pub(super) async fn task(
        &mut self,
        shared: &Shared,
        retried: &mut u32,
        created: &mut bool,
        inline: &mut bool,
    ) -> Result<(), Failure> {
        let call = self.task_call(shared, &format!("t{}-{}", self.tag, self.seq));
        let (task, poll) = match self.create_task(shared, call.params.clone(), retried).await? {
            Creation::Task(task, poll) => (task, poll),
            Creation::Inline(result) => {
                *created = true;
                *inline = true;
                // Its key ran (the result says so): the ledger must show it once.
                acknowledge_key(shared, &call, "(answered inline)");
                return call.check(&result);
            }
        };
        *created = true;
        acknowledge_key(shared, &call, &task);
        let deadline = Instant::now() + shared.deadline;
        let done = self.settle(shared, &task, poll, deadline, retried).await?;
        ended_completed(&task, &done)?;
        call.check(&done["result"])
    }

    /// A task that parks for input (`delete_records` asks to confirm), answered with
    /// `tasks/update`, then completed.
    pub(super) async fn task_input(
        &mut self,
        shared: &Shared,
        retried: &mut u32,
        created: &mut bool,
    ) -> Result<(), Failure> {
        let table = format!("tbl_{}_{}", self.tag, self.seq);
        let params = json!({"name": "delete_records", "arguments": {"table": table, "older_than_days": 1}});
        let (task, poll) = self.create_task(shared, params, retried).await?.task()?;
        *created = true;
        let deadline = Instant::now() + shared.deadline;
        let parked = self.watch(shared, &task, poll, deadline, retried, |s| s == "input_required").await?;
        if parked["status"] != "input_required" || !parked["inputRequests"]["confirm"].is_object() {
            return Err(Failure::Wrong(format!("task {task} should ask to confirm: {parked}")));
        }
        let id = self.next_id();
        let answer =
            json!({"taskId": task, "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}}});
        let ack = retry(left(deadline), retried, || shared.mcp.modern(&id, "tasks/update", answer.clone(), true))
            .await
            .map_err(|f| acknowledged(&task, f))?;
        if ack.result["resultType"] != "complete" {
            return Err(Failure::Wrong(format!("tasks/update ack {}", ack.result)));
        }
        let done = self.settle(shared, &task, poll, deadline, retried).await?;
        ended_completed(&task, &done)?;
        expect_deleted(&done["result"], &table)
    }

    /// One `tasks/get` of this client's completed task (created and settled first: it runs
    /// for [`GET_TASK_SECONDS`], longer than a server's longest answer window, so the
    /// creation answers with a task to read, not with its result).
    pub(super) async fn get(&mut self, shared: &Shared, retried: &mut u32, created: &mut bool) -> Result<(), Failure> {
        let (task, text) = match &self.finished {
            Some(finished) => finished.clone(),
            None => {
                let label = format!("g{}-{}", self.tag, self.seq);
                let params =
                    json!({"name": "slow_compute", "arguments": {"seconds": GET_TASK_SECONDS, "label": label}});
                let (task, poll) = self.create_task(shared, params, retried).await?.task()?;
                *created = true;
                let done = self.settle(shared, &task, poll, Instant::now() + shared.deadline, retried).await?;
                ended_completed(&task, &done)?;
                let finished = (task, format!("Computed {label} in {GET_TASK_SECONDS} s"));
                self.finished = Some(finished.clone());
                finished
            }
        };
        let id = self.next_id();
        let answer =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tasks/get", json!({"taskId": task}), true))
                .await
                .map_err(|f| acknowledged(&task, f))?;
        ended_completed(&task, &answer.result)?;
        expect_text(&answer.result["result"], &text)
    }

    pub(super) async fn cancel(
        &mut self,
        shared: &Shared,
        retried: &mut u32,
        created: &mut bool,
    ) -> Result<(), Failure> {
        let label = format!("x{}-{}", self.tag, self.seq);
        let params = json!({"name": "slow_compute", "arguments": {"seconds": 600.0, "label": label}});
        let (task, poll) = self.create_task(shared, params, retried).await?.task()?;
        *created = true;
        let deadline = Instant::now() + shared.deadline;
        let id = self.next_id();
        let ack =
            retry(left(deadline), retried, || shared.mcp.modern(&id, "tasks/cancel", json!({"taskId": task}), true))
                .await
                .map_err(|f| acknowledged(&task, f))?;
        if ack.result["resultType"] != "complete" {
            return Err(Failure::Wrong(format!("cancel ack {}", ack.result)));
        }
        let done = self.settle(shared, &task, poll.min(Duration::from_millis(100)), deadline, retried).await?;
        match done["status"].as_str() {
            Some("cancelled") => Ok(()),
            // Cancellation is cooperative: the run may have ended first.
            Some("failed") => Err(task_failed(&task, &done["error"]["message"])),
            other => Err(Failure::Wrong(format!("cancelled task {task} ended {other:?}"))),
        }
    }
}
