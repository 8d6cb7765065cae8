//! The 2025-11-25 task flow: a session, a task created by `tools/call` with `params.task`,
//! its result awaited with `tasks/result` (which blocks until the task ends), and its status
//! read to tell a failed task from a failed request.

use serde_json::{Value, json};
use tokio::time::Instant;

use super::outcome::Failure;
use super::outcome::{acknowledged, task_failed};
use super::retry::{left, retry};
use super::{Client, Shared, acknowledge_key, claim_id};
use crate::mcp::{Answer, CallError};

impl Client {
    pub(super) async fn legacy_task(
        &mut self,
        shared: &Shared,
        retried: &mut u32,
        created: &mut bool,
    ) -> Result<(), Failure> {
        let mut call = self.task_call(shared, &format!("l{}-{}", self.tag, self.seq));
        let session = match &self.session {
            Some(s) => s.clone(),
            None => {
                let id = self.next_id();
                let s = retry(shared.deadline, retried, || async {
                    shared.mcp.initialize(&id).await.map(|s| Answer { result: Value::Null, session: Some(s) })
                })
                .await?
                .session
                .unwrap_or_default();
                self.session = Some(s.clone());
                s
            }
        };
        let id = self.next_id();
        call.params["task"] = json!({});
        let created_answer = retry(shared.deadline, retried, || {
            shared.mcp.legacy(&id, "tools/call", call.params.clone(), Some(&session))
        })
        .await?;
        let task = created_answer.result["task"]["taskId"]
            .as_str()
            .ok_or_else(|| Failure::Wrong(format!("expected {{task}}, got {}", created_answer.result)))?
            .to_owned();
        claim_id(shared, &task)?;
        *created = true;
        acknowledge_key(shared, &call, &task);
        let deadline = Instant::now() + shared.deadline;
        let id = self.next_id();
        // `tasks/result` blocks until the task ends: a task that never does is stuck at the
        // deadline, not after the HTTP timeout.
        let waited = tokio::time::timeout(
            left(deadline),
            retry(left(deadline), retried, || {
                shared.mcp.legacy(&id, "tasks/result", json!({"taskId": task}), Some(&session))
            }),
        )
        .await;
        let result = match waited {
            Ok(Ok(answer)) => answer.result,
            // A failed task's `tasks/result` is its error; the task's status tells it from a
            // request that failed.
            Ok(Err(failure)) => {
                if let Failure::Call(CallError::Rpc { message, .. }) = &failure
                    && self.legacy_status(shared, &session, &task, deadline, retried).await.as_deref() == Some("failed")
                {
                    return Err(task_failed(&task, &Value::String(message.clone())));
                }
                return Err(acknowledged(&task, failure));
            }
            Err(_) => return Err(Failure::Stuck(format!("task {task} not terminal within {:?}", shared.deadline))),
        };
        if result["_meta"]["io.modelcontextprotocol/related-task"]["taskId"] != task.as_str() {
            return Err(Failure::Wrong(format!("tasks/result without the related-task _meta: {result}")));
        }
        call.check(&result)
    }

    /// A 2025-11-25 task's status (`tasks/get`, retried through transient failures until
    /// `deadline`), if it can be read.
    async fn legacy_status(
        &mut self,
        shared: &Shared,
        session: &str,
        task: &str,
        deadline: Instant,
        retried: &mut u32,
    ) -> Option<String> {
        let id = self.next_id();
        let params = json!({"taskId": task});
        let answer =
            retry(left(deadline), retried, || shared.mcp.legacy(&id, "tasks/get", params.clone(), Some(session)))
                .await
                .ok()?;
        answer.result["status"].as_str().map(str::to_owned)
    }
}
