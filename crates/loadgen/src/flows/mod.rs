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
//!
//! Rooms: `outcome` (how a flow ended, and the checks of what the server answered), `retry`
//! (retrying through transient failures), `modern` (the 2026-07-28 task flows), `legacy`
//! (the 2025-11-25 task flow), `calls` (synchronous calls, one round or several).

mod calls;
mod legacy;
mod modern;
mod outcome;
mod retry;

use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::mcp::Mcp;
use crate::options::Scenario;
use outcome::expect_text;
pub(crate) use outcome::{Done, Failure};
pub(crate) use retry::retry;

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
}

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
