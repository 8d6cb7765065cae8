//! The client flows, each verified end to end: the right text back for the right call, a
//! task that reaches the status it should, a task id never handed to two calls, and what
//! became of every task whose id the client got back (ended, missing, or stuck).
//!
//! Retries: a task's creation is retried after a transient failure with the same JSON-RPC id
//! (2025-11-25: the server's per-session idempotency) and the same idempotency key
//! (2026-07-28: `_meta["io.mcpgate/idempotencyKey"]`), so the server returns the task the lost
//! attempt created; requests about a created task are retried until the task's deadline (a
//! failover makes the fleet unavailable for some seconds), and a multi-round call's round is
//! retried (rounds carry their state, so a retry is the same round); a synchronous call is not
//! retried, so its failure is reported as such.

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::mcp::{Answer, CallError, Mcp};
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

/// What every flow of a run shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) mcp: Mcp,
    pub(crate) poll: Option<Duration>,
    pub(crate) deadline: Duration,
    pub(crate) task_seconds: f64,
    /// The tool the sync scenario calls.
    pub(crate) echo_tool: String,
    /// The tool the task scenarios call with a key when runs are counted (else `slow_compute`).
    pub(crate) counted_tool: Option<String>,
    /// Keys of the counted tasks whose ids the clients got back: the ledger is read for these.
    pub(crate) counted_keys: Mutex<Vec<(String, String)>>,
    /// Task ids handed out so far (a second hand-out is a duplicate).
    pub(crate) seen: Mutex<HashSet<String>>,
}

/// The call a task scenario makes, and what its result must say.
#[derive(Debug)]
struct TaskCall {
    /// `tools/call` params (name and arguments).
    params: Value,
    /// The counted tool's key: its text must name it.
    key: Option<String>,
    /// Otherwise the exact text `slow_compute` answers.
    text: String,
}

impl TaskCall {
    fn check(&self, result: &Value) -> Result<(), Failure> {
        match &self.key {
            Some(key) => match result["content"][0]["text"].as_str() {
                Some(text) if text.contains(key.as_str()) => Ok(()),
                _ => Err(Failure::Wrong(format!("expected a text naming {key:?}, got {result}"))),
            },
            None => expect_text(result, &self.text),
        }
    }
}

/// One virtual client: its id, request counter and legacy session.
#[derive(Debug)]
pub(crate) struct Client {
    /// The run's tag and the client's index: request ids and task labels start with it, so
    /// a second run within the server's idempotency window creates new tasks rather than
    /// being handed the first run's (which would read as instant, correct results).
    tag: String,
    /// `<run tag>-<client>`: counted keys start with it.
    key_prefix: String,
    seq: u64,
    session: Option<String>,
    /// The completed task the get scenario reads, and the text of its result.
    finished: Option<(String, String)>,
}

impl Client {
    pub(crate) fn new(run: &str, index: usize) -> Self {
        Self {
            tag: format!("{run}.{index}"),
            key_prefix: format!("{run}-{index}"),
            seq: 0,
            session: None,
            finished: None,
        }
    }

    fn next_id(&mut self) -> String {
        self.seq += 1;
        format!("lg{}-{}", self.tag, self.seq)
    }

    /// Runs one flow of `scenario`.
    pub(crate) async fn run(&mut self, shared: &Shared, scenario: Scenario) -> Done {
        let started = Instant::now();
        let mut retried = 0;
        let mut created_task = false;
        let mut answered_inline = false;
        let outcome = match scenario {
            Scenario::Sync => self.sync(shared).await,
            Scenario::Task => self.task(shared, &mut retried, &mut created_task, &mut answered_inline).await,
            Scenario::LegacyTask => self.legacy_task(shared, &mut retried, &mut created_task).await,
            Scenario::TaskInput => self.task_input(shared, &mut retried, &mut created_task).await,
            Scenario::Mrtr2 => self.mrtr2(shared, &mut retried).await,
            Scenario::Mrtr3 => self.mrtr3(shared, &mut retried).await,
            Scenario::Cancel => self.cancel(shared, &mut retried, &mut created_task).await,
            Scenario::Get => self.get(shared, &mut retried, &mut created_task).await,
        };
        Done { scenario, elapsed: started.elapsed(), outcome, retried, created_task, answered_inline }
    }

    async fn sync(&mut self, shared: &Shared) -> Result<(), Failure> {
        let id = self.next_id();
        let text = format!("echo {id}");
        let answer = shared
            .mcp
            .modern(&id, "tools/call", json!({"name": shared.echo_tool, "arguments": {"text": text}}), false)
            .await
            .map_err(Failure::Call)?;
        expect_text(&answer.result, &text)
    }

    /// What this flow's task runs: the counted tool with a key unique to the flow (the
    /// client's request count at the flow's start), or `slow_compute` with `label`.
    fn task_call(&self, shared: &Shared, label: &str) -> TaskCall {
        let seconds = shared.task_seconds;
        match &shared.counted_tool {
            Some(tool) => {
                let key = format!("{}-{}", self.key_prefix, self.seq);
                let mut arguments = json!({"key": key});
                if seconds > 0.0 {
                    arguments["seconds"] = json!(seconds);
                }
                TaskCall { params: json!({"name": tool, "arguments": arguments}), key: Some(key), text: String::new() }
            }
            None => TaskCall {
                params: json!({"name": "slow_compute", "arguments": {"seconds": seconds, "label": label}}),
                key: None,
                text: format!("Computed {label} in {seconds} s"),
            },
        }
    }

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
    async fn task(
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
    async fn task_input(&mut self, shared: &Shared, retried: &mut u32, created: &mut bool) -> Result<(), Failure> {
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
    async fn get(&mut self, shared: &Shared, retried: &mut u32, created: &mut bool) -> Result<(), Failure> {
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

    async fn cancel(&mut self, shared: &Shared, retried: &mut u32, created: &mut bool) -> Result<(), Failure> {
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

    async fn legacy_task(&mut self, shared: &Shared, retried: &mut u32, created: &mut bool) -> Result<(), Failure> {
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

    async fn mrtr2(&mut self, shared: &Shared, retried: &mut u32) -> Result<(), Failure> {
        let table = format!("tbl_{}_{}", self.tag, self.seq);
        let args = json!({"table": table, "older_than_days": 1});
        let state = self.round(shared, "delete_records", &args, json!({}), None, retried).await?;
        let answers = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
        let id = self.next_id();
        let params =
            json!({"name": "delete_records", "arguments": args, "inputResponses": answers, "requestState": state});
        let done =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        expect_deleted(&done.result, &table)
    }

    async fn mrtr3(&mut self, shared: &Shared, retried: &mut u32) -> Result<(), Failure> {
        let item = format!("WI-{}-{}", self.tag, self.seq);
        let args = json!({"id": item});
        let s1 = self.round(shared, "update_work_item", &args, json!({}), None, retried).await?;
        let field = json!({"field": {"action": "accept", "content": {"field": "assignee"}}});
        let s2 = self.round(shared, "update_work_item", &args, field, Some(&s1), retried).await?;
        let owner = format!("owner-{}", self.seq);
        let value = json!({"value": {"action": "accept", "content": {"value": owner}}});
        let id = self.next_id();
        let params =
            json!({"name": "update_work_item", "arguments": args, "inputResponses": value, "requestState": s2});
        let done =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        expect_text(&done.result, &format!("Work item {item} updated: assignee \"unassigned\" → \"{owner}\""))
    }

    /// One round that must ask for input; returns its requestState.
    async fn round(
        &mut self,
        shared: &Shared,
        tool: &str,
        args: &Value,
        answers: Value,
        state: Option<&str>,
        retried: &mut u32,
    ) -> Result<String, Failure> {
        let id = self.next_id();
        let mut params = json!({"name": tool, "arguments": args, "inputResponses": answers});
        if let Some(state) = state {
            params["requestState"] = json!(state);
        }
        let answer =
            retry(shared.deadline, retried, || shared.mcp.modern(&id, "tools/call", params.clone(), false)).await?;
        if answer.result["resultType"] != "input_required" {
            return Err(Failure::Wrong(format!("{tool} should ask for input: {}", answer.result)));
        }
        answer.result["requestState"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Failure::Wrong(format!("{tool} gave no requestState")))
    }
}

/// How long the get scenario's task runs: longer than mcpgate's longest answer window
/// (`tasks.answer_within_ms`, at most 250 ms), so it is a task to read.
const GET_TASK_SECONDS: f64 = 0.3;

/// Records a task id; a second hand-out of the same id is a duplicate.
fn claim_id(shared: &Shared, task: &str) -> Result<(), Failure> {
    let mut seen = shared.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if seen.insert(task.to_owned()) {
        Ok(())
    } else {
        Err(Failure::Duplicate(format!("task id {task} handed out twice")))
    }
}

/// Records the key of a counted task whose id the client got back (the ledger is read for it).
fn acknowledge_key(shared: &Shared, call: &TaskCall, task: &str) {
    if let Some(key) = &call.key {
        shared
            .counted_keys
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((key.clone(), task.to_owned()));
    }
}

/// A request about an acknowledged task that failed for good: "task not found" means the
/// task is missing; a transient failure that outlasted the deadline means it is stuck.
fn acknowledged(task: &str, failure: Failure) -> Failure {
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

/// Time left until `deadline`.
fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}

/// `delete_records` confirmed: "Deleted N records older than D days from TABLE."
/// A terminal task read back: completed, or a visible failure (`failed`, with its error), or
/// a wrong answer.
fn ended_completed(task: &str, done: &Value) -> Result<(), Failure> {
    match done["status"].as_str() {
        Some("completed") => Ok(()),
        Some("failed") => Err(task_failed(task, &done["error"]["message"])),
        _ => Err(Failure::Wrong(format!("task {task} ended {}", done["status"]))),
    }
}

/// `task` ended `failed` with `message` (the task's error).
fn task_failed(task: &str, message: &Value) -> Failure {
    Failure::TaskFailed(format!("task {task} failed: {}", message.as_str().unwrap_or("(no message)")))
}

fn expect_deleted(result: &Value, table: &str) -> Result<(), Failure> {
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    if text.starts_with("Deleted ") && text.ends_with(&format!("from {table}.")) {
        Ok(())
    } else {
        Err(Failure::Wrong(format!("delete_records said {result}")))
    }
}

fn expect_text(result: &Value, expected: &str) -> Result<(), Failure> {
    match result["content"][0]["text"].as_str() {
        Some(text) if text == expected => Ok(()),
        _ => Err(Failure::Wrong(format!("expected {expected:?}, got {result}"))),
    }
}

/// Repeats `attempt` while it fails transiently, with backoff, until `within` has passed.
pub(crate) async fn retry<F, Fut>(within: Duration, retried: &mut u32, mut attempt: F) -> Result<Answer, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Answer, CallError>>,
{
    let deadline = Instant::now() + within;
    let mut backoff = Duration::from_millis(50);
    loop {
        match attempt().await {
            Ok(answer) => return Ok(answer),
            Err(e) if e.transient() && Instant::now() + backoff < deadline => {
                *retried += 1;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(Failure::Call(e)),
        }
    }
}

#[cfg(test)]
mod tests {
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
