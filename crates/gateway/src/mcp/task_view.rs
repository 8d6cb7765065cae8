//! One stored task, rendered for each era: the extension's flat `Task`/`DetailedTask`
//! (`ttlMs`, `pollIntervalMs`, inline result or error) and 2025-11-25's `Task` (`ttl`,
//! `pollInterval`), where a tool result with `isError: true` reads as `failed`.

use serde_json::{Map, Value};

use mcpgate_protocol::ErrorObject;
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::meta::RELATED_TASK_KEY;
use mcpgate_protocol::task::{DetailedTask, LegacyTask, Task, TaskStatus};
use mcpgate_store::{TaskOutcome, TaskRecord};

use crate::error::{GatewayError, UnquotedJsonError};
use crate::time::iso8601;

/// The extension's `Task`.
pub fn modern(record: &TaskRecord) -> Task {
    Task {
        task_id: record.id.to_string(),
        status: record.status,
        status_message: record.status_message.clone(),
        created_at: iso8601(record.created_ms),
        last_updated_at: iso8601(record.updated_ms),
        ttl_ms: record.ttl_ms,
        poll_interval_ms: Some(record.poll_interval_ms),
    }
}

/// 2025-11-25's `Task`.
pub fn legacy(record: &TaskRecord) -> LegacyTask {
    LegacyTask {
        task_id: record.id.to_string(),
        status: legacy_status(record),
        status_message: record.status_message.clone(),
        created_at: iso8601(record.created_ms),
        last_updated_at: iso8601(record.updated_ms),
        ttl: record.ttl_ms,
        poll_interval: Some(record.poll_interval_ms),
    }
}

/// The extension's `tasks/get` view: outstanding input requests, or the outcome, inline.
pub fn detailed(record: &TaskRecord) -> Result<DetailedTask, GatewayError> {
    let mut view = DetailedTask {
        task: modern(record),
        input_requests: None,
        result: None,
        error: None,
        result_type: None,
        meta: None,
    };
    match (record.status, &record.outcome) {
        (TaskStatus::InputRequired, _) => view.input_requests = Some(input_requests(record)?),
        (TaskStatus::Completed, Some(TaskOutcome::Result(json))) => {
            let mut result = parse::<Map<String, Value>>(json, "result")?;
            result.insert("resultType".to_owned(), Value::String("complete".to_owned()));
            view.result = Some(Value::Object(result));
        }
        (TaskStatus::Failed, Some(TaskOutcome::Error(json))) => view.error = Some(parse::<ErrorObject>(json, "error")?),
        _ => {}
    }
    Ok(view)
}

/// A parked task's outstanding input requests.
pub fn input_requests(record: &TaskRecord) -> Result<InputRequests, GatewayError> {
    record.input_requests.iter().map(|(key, json)| Ok((key.clone(), parse(json, "input request")?))).collect()
}

/// What legacy `tasks/result` answers for a terminal task: the stored result (with the
/// related-task `_meta` when `related`), or the stored error.
pub fn legacy_result(record: &TaskRecord, related: bool) -> Result<Vec<u8>, GatewayError> {
    match &record.outcome {
        Some(TaskOutcome::Result(json)) if !related => Ok(json.as_bytes().to_vec()),
        Some(TaskOutcome::Result(json)) => {
            let mut result = parse::<Map<String, Value>>(json, "result")?;
            let meta = result.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(RELATED_TASK_KEY.to_owned(), serde_json::json!({ "taskId": record.id.as_str() }));
            }
            serde_json::to_vec(&result).map_err(|e| GatewayError::internal_caused("task result", e))
        }
        Some(TaskOutcome::Error(json)) => Err(GatewayError::TaskFailed { error: parse(json, "error")? }),
        None => Err(GatewayError::TaskFailed {
            error: ErrorObject::new(
                mcpgate_protocol::ErrorCode::INTERNAL_ERROR,
                format!("Task {} was {} and has no result", record.id, record.status.as_str()),
            ),
        }),
    }
}

/// 2025-11-25 reads a tool result with `isError: true` as a failed task.
fn legacy_status(record: &TaskRecord) -> TaskStatus {
    match record.status {
        TaskStatus::Completed if record.tool_error => TaskStatus::Failed,
        status => status,
    }
}

fn parse<T: serde::de::DeserializeOwned>(json: &str, what: &str) -> Result<T, GatewayError> {
    // The stored text was sealed at rest: the cause keeps where it broke, not what it quotes.
    serde_json::from_str(json).map_err(|e| {
        GatewayError::internal_caused(format!("stored task {what} unreadable"), UnquotedJsonError::from(e))
    })
}
