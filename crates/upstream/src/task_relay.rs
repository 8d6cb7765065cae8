//! An upstream's task, tracked by the gateway call (or gateway task) that started it: polled
//! with `tasks/get` at the upstream's poll interval, its status message relayed, its input
//! requests (2026-07-28) turned into the gateway's own round, and its result (inline, or from
//! `tasks/result` for a 2025-11-25 upstream) relayed as the call's result. Cancelling the
//! gateway call cancels the upstream task.
//!
//! Invariants: inside a gateway task, the upstream task id is checkpointed before the first
//! poll, so a replica that dies while tracking loses nothing (the next run resumes tracking
//! from the id rather than calling the tool again); one poll loop runs per upstream task,
//! however many clients poll the gateway task (they read the store); every wait is bounded and
//! every upstream failure ends as a tool error naming the upstream; every request about the
//! task (polls, answers, result, cancellation) is made for the call's caller, so an upstream
//! with token exchange sees that caller's exchanged token on each.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::capabilities::TASKS_EXTENSION;
use mcpgate_protocol::input::{InputRequest, InputRequests};
use mcpgate_protocol::meta::CLIENT_CAPABILITIES_KEY;
use mcpgate_protocol::relayed::RawMembers;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{Failure, Outcome, ToolCall, ToolContext};

use crate::continuation::{Continuation, exposed_key};
use crate::error::{UpstreamError, cause};
use crate::input_relay;
use crate::upstream::{Request, Upstream};

/// Poll intervals are kept within these bounds whatever the upstream suggests.
const MIN_POLL: Duration = Duration::from_millis(100);
const MAX_POLL: Duration = Duration::from_secs(5);
/// Polls that may fail in a row (upstream down, timing out) before the call gives up.
const MAX_FAILED_POLLS: u32 = 10;
/// How long a cancellation sent upstream may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(5);

/// An upstream task being tracked.
#[derive(Debug, Clone)]
pub(crate) struct UpstreamTask {
    /// The upstream's id.
    pub(crate) id: String,
    /// A 2025-11-25 task (`tasks/result` holds the result).
    pub(crate) legacy: bool,
    /// The poll interval the upstream suggests.
    pub(crate) poll: Duration,
}

/// A task's status as either era's `tasks/get` reports it (the fields both share).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Polled {
    status: String,
    #[serde(default)]
    status_message: Option<String>,
    #[serde(default)]
    poll_interval_ms: Option<u64>,
    #[serde(default)]
    poll_interval: Option<u64>,
    #[serde(default)]
    input_requests: Option<InputRequests>,
    #[serde(default)]
    result: Option<Box<serde_json::value::RawValue>>,
    #[serde(default)]
    error: Option<Value>,
}

impl UpstreamTask {
    /// The task a `tools/call` result announces, if it is a `CreateTaskResult` of either era:
    /// 2026-07-28's flat `{resultType: "task", taskId, …}` or 2025-11-25's `{task: {taskId, …}}`.
    pub(crate) fn created(result_type: Option<&str>, members: &RawMembers) -> Option<Result<Self, String>> {
        let (task, legacy) = match (result_type, members.get("taskId"), members.get("task")) {
            (Some("task"), Some(_), _) => (None, false),
            (None, None, Some(task)) => (Some(task), true),
            (Some("task"), None, _) => return Some(Err("a task result without a taskId".to_owned())),
            _ => return None,
        };
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Created {
            task_id: String,
            #[serde(default)]
            poll_interval_ms: Option<u64>,
            #[serde(default)]
            poll_interval: Option<u64>,
        }
        let parsed: Result<Created, _> = match task {
            Some(raw) => serde_json::from_str(raw.get()),
            None => {
                let id = members.get("taskId").map(|r| r.get()).unwrap_or("null");
                let interval = members.get("pollIntervalMs").map_or("null", |r| r.get());
                serde_json::from_str(&format!(r#"{{"taskId":{id},"pollIntervalMs":{interval}}}"#))
            }
        };
        Some(match parsed {
            Ok(c) if !c.task_id.is_empty() => {
                Ok(Self { id: c.task_id, legacy, poll: interval(c.poll_interval_ms.or(c.poll_interval)) })
            }
            Ok(_) => Err("a task with an empty taskId".to_owned()),
            // Text: the reason goes into the tool result the client sees, as a whole.
            Err(e) => Err(format!("a task result mcpgate cannot read ({e})")),
        })
    }
}

fn interval(ms: Option<u64>) -> Duration {
    ms.map_or(Duration::from_secs(1), Duration::from_millis).clamp(MIN_POLL, MAX_POLL)
}

/// Params of a `tasks/*` request: the task id, and the tasks extension declared (2026-07-28
/// upstreams refuse `tasks/*` without it; 2025-11-25 ones ignore it).
fn task_params(id: &str) -> Value {
    json!({
        "taskId": id,
        "_meta": { CLIENT_CAPABILITIES_KEY: { "extensions": { TASKS_EXTENSION: {} } } },
    })
}

/// Tracks `task` until it ends or asks for input; `answering` are the upstream's keys of the
/// call's input round `round` that the call's answers respond to (sent upstream first).
pub(crate) async fn track(
    upstream: &Arc<Upstream>,
    mut task: UpstreamTask,
    answering: &[String],
    round: u32,
    call: &ToolCall,
    cx: &ToolContext,
) -> Outcome<CallToolResult> {
    let name = upstream.name();
    let caller = cx.principal();
    let tool_error = |what: String| Outcome::Complete(CallToolResult::error(format!("Upstream {name}: {what}")));
    if !answering.is_empty() {
        let mut params = task_params(&task.id);
        match input_relay::answers(call, answering, round) {
            Ok(answers) => params["inputResponses"] = Value::Object(answers),
            Err(failure) => return Outcome::Failed(failure),
        }
        let request = Request::new("tasks/update", params).name(&task.id).caller(caller);
        // Not fatal: an upstream that did not take the answers asks again at the next poll.
        if let Err(e) = upstream.request(request, &CancellationToken::new()).await {
            tracing::warn!(upstream = name, task = %task.id, error = &e as &dyn std::error::Error, "answers not delivered to the upstream task");
        }
    }
    let continuation = Continuation::Task {
        upstream: name.to_owned(),
        task_id: task.id.clone(),
        legacy: task.legacy,
        keys: vec![],
        round,
    };
    if cx.can_checkpoint() && !cx.checkpoint(&continuation.to_state()).await {
        tracing::warn!(upstream = name, task = %task.id, "upstream task id not checkpointed; a replica failure loses it");
    }
    let mut failures = 0;
    let mut last_message: Option<String> = None;
    let mut changes = 0.0;
    loop {
        tokio::select! {
            () = tokio::time::sleep(task.poll) => {}
            () = cx.cancelled() => {
                // Not when this replica merely stops: another run resumes tracking the task. Sent
                // from its own task (bounded), as a cancelled run is dropped soon.
                if cx.cancelled_for_good().await {
                    let (upstream, id, caller) = (upstream.clone(), task.id.clone(), caller.clone());
                    tokio::spawn(async move { cancel(&upstream, &id, &caller).await });
                }
                return Outcome::Failed(Failure::Unavailable("cancelled".to_owned()));
            }
        }
        let request = Request::new("tasks/get", task_params(&task.id)).name(&task.id).caller(caller);
        let polled = match upstream.request(request, &CancellationToken::new()).await {
            Ok(raw) => serde_json::from_str::<Polled>(raw.get()).map_err(|e| UpstreamError::Protocol {
                detail: "tasks/get answer unreadable".to_owned(),
                source: Some(cause(e)),
            }),
            Err(e) => Err(e),
        };
        let polled = match polled {
            Ok(polled) => {
                failures = 0;
                polled
            }
            Err(UpstreamError::Rpc { code: -32602, .. }) => {
                return tool_error(format!(
                    "its task {} is gone (expired, or held by a connection this replica does not share)",
                    task.id
                ));
            }
            Err(e) => {
                failures += 1;
                if failures >= MAX_FAILED_POLLS {
                    return tool_error(format!("its task {} could not be polled: {}", task.id, e.client_text()));
                }
                continue;
            }
        };
        if let Some(ms) = polled.poll_interval_ms.or(polled.poll_interval) {
            task.poll = interval(Some(ms));
        }
        if polled.status_message.is_some() && polled.status_message != last_message {
            last_message.clone_from(&polled.status_message);
            changes += 1.0;
            cx.progress(changes, None, last_message.as_deref()).await;
        }
        match polled.status.as_str() {
            "working" => {}
            "input_required" => match polled.input_requests {
                Some(requests) if !requests.is_empty() => {
                    // Keys made unique per round: an upstream that did not get the last
                    // answers asks the same keys again.
                    let next_round = round + 1;
                    let keys = requests.keys().cloned().collect();
                    let requests =
                        requests.into_iter().map(|(key, request)| (exposed_key(&key, next_round), request)).collect();
                    let next = Continuation::Task {
                        upstream: name.to_owned(),
                        task_id: task.id.clone(),
                        legacy: task.legacy,
                        keys,
                        round: next_round,
                    };
                    return Outcome::NeedInput { requests, state: Some(next.to_state()) };
                }
                // 2025-11-25 upstreams ask on a tasks/result stream: inside a gateway task the
                // questions are asked in place (the upstream's request waits on this replica).
                _ if task.legacy && cx.can_checkpoint() => {
                    if let Some(outcome) = relay_legacy_input(upstream, &task, cx).await {
                        return outcome;
                    }
                }
                _ if task.legacy => {
                    cancel(upstream, &task.id, caller).await;
                    return tool_error(format!(
                        "its task {} asks for input, which reaches a client only inside a gateway task (call it \
                         as a task); the upstream task was cancelled",
                        task.id
                    ));
                }
                // Answered meanwhile: the next poll sees it working again.
                _ => {}
            },
            "completed" | "failed" if task.legacy => return legacy_result(upstream, &task, caller).await,
            "completed" => {
                return match polled.result.as_deref().map(|r| RawMembers::split(r.get())) {
                    Some(Ok(r)) if r.members.has("content") => {
                        Outcome::Complete(CallToolResult::relayed(r.members, r.is_error))
                    }
                    _ => tool_error(format!("its task {} completed without a tool result", task.id)),
                };
            }
            "failed" => {
                let message = polled.error.as_ref().and_then(|e| e.get("message")).and_then(Value::as_str);
                return tool_error(format!("its task {} failed: {}", task.id, message.unwrap_or("no reason given")));
            }
            "cancelled" => return tool_error(format!("its task {} was cancelled", task.id)),
            other => return tool_error(format!("its task {} reports an unknown status {other:?}", task.id)),
        }
    }
}

/// Serves a 2025-11-25 upstream task's questions: reads `tasks/result` (on which the upstream
/// sends them), asks each in place, answers the upstream on this replica's connection. Ends
/// with the task's outcome when `tasks/result` answers, or `None` to go on polling (the read
/// timed out or broke); an unanswered question ends the call.
async fn relay_legacy_input(
    upstream: &Arc<Upstream>,
    task: &UpstreamTask,
    cx: &ToolContext,
) -> Option<Outcome<CallToolResult>> {
    let name = upstream.name();
    let caller = cx.principal();
    let mut route = upstream.route(&task.id);
    let request = Request::new("tasks/result", task_params(&task.id)).name(&task.id).caller(caller);
    let reading = CancellationToken::new();
    let result = upstream.request(request, &reading);
    tokio::pin!(result);
    loop {
        tokio::select! {
            outcome = &mut result => return match outcome {
                Ok(raw) => Some(relayed_result(name, &task.id, &raw)),
                Err(UpstreamError::Rpc { code, message }) if code != -32603 => Some(Outcome::Complete(
                    CallToolResult::error(format!("Upstream {name}: its task {} failed: {message}", task.id)),
                )),
                Err(e) => {
                    tracing::debug!(upstream = name, task = %task.id, error = &e as &dyn std::error::Error, "tasks/result ended early; polling on");
                    None
                }
            },
            Some(asked) = route.requests.recv() => {
                if let Err(failure) = answer_in_place(upstream, &asked, cx).await {
                    cancel(upstream, &task.id, caller).await;
                    return Some(Outcome::Complete(CallToolResult::error(format!(
                        "Upstream {name}: its task {} asked for input that was not given ({}); the upstream \
                         task was cancelled",
                        task.id,
                        failure_text(&failure)
                    ))));
                }
            }
            () = cx.cancelled() => {
                reading.cancel();
                if cx.cancelled_for_good().await {
                    let (upstream, id, caller) = (upstream.clone(), task.id.clone(), caller.clone());
                    tokio::spawn(async move { cancel(&upstream, &id, &caller).await });
                }
                return Some(Outcome::Failed(Failure::Unavailable("cancelled".to_owned())));
            }
        }
    }
}

/// Asks the client, in place (the run keeps this replica's connection to the upstream), the
/// question a server request `asked` carries, and answers the upstream with the client's
/// answer (an accepted form with its omitted fields filled from their schema defaults,
/// SEP-1034). A request mcpgate cannot relay is refused and the call goes on; `Err` (after
/// telling the upstream) when the client did not answer.
pub(crate) async fn answer_in_place(
    upstream: &Upstream,
    asked: &crate::rpc::ServerRequest,
    cx: &ToolContext,
) -> Result<(), Failure> {
    let caller = cx.principal();
    let params = asked.params.as_deref().map(|p| serde_json::from_str::<Value>(p.get()).unwrap_or(Value::Null));
    let decoded = serde_json::from_value::<InputRequest>(json!({ "method": asked.method, "params": params }));
    let Ok(question) = decoded else {
        let _ = upstream.respond(asked, Err((-32601, "mcpgate cannot relay this request")), caller).await;
        return Ok(());
    };
    let key = format!("{}-{}", upstream.name(), unique_suffix());
    let requests = InputRequests::from([(key.clone(), question)]);
    match cx.ask_in_place(&requests, None, HOLD_LIMIT).await {
        Ok(mut answers) => {
            let answer = answers
                .remove(&key)
                .and_then(|a| serde_json::to_value(&a).ok())
                .map(|a| input_relay::with_defaults(&asked.method, params.as_ref(), a).to_string());
            let sent = match &answer {
                Some(json) => upstream.respond(asked, Ok(json), caller).await,
                None => upstream.respond(asked, Err((-32603, "the client gave no answer")), caller).await,
            };
            if let Err(e) = sent {
                tracing::warn!(
                    upstream = upstream.name(),
                    error = &e as &dyn std::error::Error,
                    "answer not delivered upstream"
                );
            }
            Ok(())
        }
        Err(failure) => {
            let _ = upstream.respond(asked, Err((-32603, "the client did not answer")), caller).await;
            Err(failure)
        }
    }
}

/// How long a question of an upstream task may wait for the client's answer.
const HOLD_LIMIT: Duration = Duration::from_secs(300);

/// A suffix unique over a task's life (keys of input requests must never repeat).
fn unique_suffix() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{now:x}{n:x}")
}

fn failure_text(failure: &Failure) -> String {
    match failure {
        Failure::Unavailable(why)
        | Failure::Internal(why)
        | Failure::InvalidParams(why)
        | Failure::InvalidArguments(why) => why.clone(),
        other => format!("{other:?}"),
    }
}

/// A relayed `tasks/result` answer.
fn relayed_result(name: &str, id: &str, raw: &serde_json::value::RawValue) -> Outcome<CallToolResult> {
    match RawMembers::split(raw.get()) {
        Ok(r) if r.members.has("content") => Outcome::Complete(CallToolResult::relayed(r.members, r.is_error)),
        _ => Outcome::Complete(CallToolResult::error(format!(
            "Upstream {name}: its task {id} ended without a tool result"
        ))),
    }
}

/// A finished 2025-11-25 task's outcome, from `tasks/result`.
async fn legacy_result(upstream: &Upstream, task: &UpstreamTask, caller: &Principal) -> Outcome<CallToolResult> {
    let name = upstream.name();
    let request = Request::new("tasks/result", task_params(&task.id)).name(&task.id).caller(caller);
    match upstream.request(request, &CancellationToken::new()).await {
        Ok(raw) => relayed_result(name, &task.id, &raw),
        Err(e) => Outcome::Complete(CallToolResult::error(format!(
            "Upstream {name}: its task {} failed: {}",
            task.id,
            e.client_text()
        ))),
    }
}

/// Cancels an upstream task for the caller who presented `caller`, best effort and bounded
/// in time.
async fn cancel(upstream: &Upstream, id: &str, caller: &Principal) {
    let request = Request::new("tasks/cancel", task_params(id)).name(id).caller(caller);
    match tokio::time::timeout(CANCEL_TIMEOUT, upstream.request(request, &CancellationToken::new())).await {
        Ok(Ok(_)) => tracing::debug!(upstream = upstream.name(), task = id, "upstream task cancelled"),
        Ok(Err(e)) => tracing::debug!(
            upstream = upstream.name(),
            task = id,
            error = &e as &dyn std::error::Error,
            "upstream task not cancelled"
        ),
        Err(_) => tracing::debug!(upstream = upstream.name(), task = id, "upstream task cancellation timed out"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn created(json: &str) -> Option<Result<UpstreamTask, String>> {
        let r = RawMembers::split(json).expect("object");
        UpstreamTask::created(r.result_type.as_deref(), &r.members)
    }

    #[test]
    fn task_results_of_both_eras_are_recognised() {
        let modern = created(r#"{"resultType":"task","taskId":"m1","status":"working","pollIntervalMs":50}"#);
        let modern = modern.expect("a task").expect("readable");
        assert_eq!((modern.id.as_str(), modern.legacy, modern.poll), ("m1", false, MIN_POLL));
        let legacy = created(r#"{"task":{"taskId":"l1","status":"working","pollInterval":2000}}"#);
        let legacy = legacy.expect("a task").expect("readable");
        assert_eq!((legacy.id.as_str(), legacy.legacy, legacy.poll), ("l1", true, Duration::from_secs(2)));
        assert!(created(r#"{"content":[]}"#).is_none(), "a plain result");
        assert!(created(r#"{"resultType":"task"}"#).expect("a task").is_err());
        assert!(created(r#"{"task":{"taskId":""}}"#).expect("a task").is_err());
    }
}
