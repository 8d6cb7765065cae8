//! How the admin API shows a task: its metadata always, its payloads only when the operator
//! configured `admin.show_payloads` (and the record was read with them); and the page size
//! every listing accepts.

use serde_json::{Map, Value, json};

use mcpgate_runtime::{KeyOwner, Principal};
use mcpgate_store::{TaskOutcome, TaskRecord};

use crate::error::GatewayError;
use crate::state::AppState;

/// Entries one listing returns by default, and at most.
const DEFAULT_LIMIT: usize = 100;
const MAX_LIMIT: usize = 1000;

/// A listing's `limit` query parameter, checked (default [`DEFAULT_LIMIT`]).
pub(super) fn page_limit(limit: Option<usize>) -> Result<usize, GatewayError> {
    let limit = limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(GatewayError::AdminInvalid { detail: format!("limit must be 1 to {MAX_LIMIT}") });
    }
    Ok(limit)
}

/// The upstream whose tool `tool` is, if it is one's.
pub(super) fn upstream_of(state: &AppState, tool: &str) -> Option<String> {
    state.catalog.load().tool(tool).and_then(|(t, _)| t.descriptor().upstream.as_deref().map(str::to_owned))
}

/// Who owns a task, as operators know callers: the token's issuer and subject (read from the
/// owner key, so nothing sealed is read), and whether the task belongs to one anonymous
/// session only (`tasks.anonymous_scope = "session"`).
pub(super) fn owner(key: &str) -> Value {
    match Principal::parse_key(key) {
        Some(KeyOwner { issuer, subject, narrowed: false }) => json!({ "issuer": issuer, "subject": subject }),
        Some(KeyOwner { issuer, subject, narrowed: true }) => {
            json!({ "issuer": issuer, "subject": subject, "session": true })
        }
        None => Value::String(key.to_owned()),
    }
}

/// A task's metadata: what every listing shows.
pub(super) fn summary(state: &AppState, task: &TaskRecord) -> Value {
    let mut out = json!({
        "taskId": task.id.as_str(),
        "owner": owner(&task.owner),
        "status": task.status.as_str(),
        "tool": task.tool,
        "createdAtMs": task.created_ms,
        "updatedAtMs": task.updated_ms,
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_interval_ms,
    });
    let Value::Object(fields) = &mut out else { return out };
    if let Some(upstream) = upstream_of(state, &task.tool) {
        fields.insert("upstream".to_owned(), upstream.into());
    }
    if let Some(message) = &task.status_message {
        fields.insert("statusMessage".to_owned(), message.clone().into());
    }
    if let Some(progress) = task.progress() {
        fields.insert("progress".to_owned(), progress.into());
    }
    if !task.input_requests.is_empty() {
        fields.insert("waitingFor".to_owned(), task.input_requests.keys().cloned().collect::<Vec<_>>().into());
    }
    if task.tool_error {
        fields.insert("toolError".to_owned(), true.into());
    }
    out
}

/// One task in full: its metadata, and, from a full read, the scopes it runs with and its
/// payloads.
pub(super) fn detail(state: &AppState, task: &TaskRecord, payloads: bool) -> Value {
    let mut out = summary(state, task);
    let Value::Object(fields) = &mut out else { return out };
    if payloads {
        fields.insert("scopes".to_owned(), task.scopes.clone().into());
        fields.insert("attempts".to_owned(), task.attempts.into());
        fields.insert("arguments".to_owned(), raw(&task.arguments));
        match &task.outcome {
            Some(TaskOutcome::Result(r)) => drop(fields.insert("result".to_owned(), raw(r))),
            Some(TaskOutcome::Error(e)) => drop(fields.insert("error".to_owned(), raw(e))),
            None => {}
        }
        let answers: Map<String, Value> = task.input_responses.iter().map(|(k, a)| (k.clone(), raw(&a.json))).collect();
        if !answers.is_empty() {
            fields.insert("inputResponses".to_owned(), Value::Object(answers));
        }
        if let Some(state) = &task.state {
            fields.insert("state".to_owned(), raw(state));
        }
    }
    out
}

/// Stored JSON as a value (as a string if it is not JSON).
fn raw(json: &str) -> Value {
    serde_json::from_str(json).unwrap_or_else(|_| Value::String(json.to_owned()))
}
