//! Decoding a task record from the flat field/value list Redis returns (`HGETALL`, the tail
//! of a script's reply, or an `HMGET` of named fields), and the fields each kind of read
//! names.

use std::collections::HashMap;

use redis::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;

use crate::error::StoreError;
use crate::model::{RawAnswer, RawByKey, TaskId, TaskOutcome, TaskRecord};

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        Value::Int(n) => Some(n.to_string()),
        Value::VerbatimString { text, .. } => Some(text.clone()),
        _ => None,
    }
}

/// `v` as text, taking its bytes (a record's fields can be large results).
fn into_text(v: Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b).ok(),
        Value::SimpleString(s) => Some(s),
        Value::Int(n) => Some(n.to_string()),
        Value::VerbatimString { text, .. } => Some(text),
        _ => None,
    }
}

/// What every read fetches: enough to render a task's status in either era, and to find the
/// keys of a parked task's outstanding requests. Never the arguments or capabilities.
pub(super) const CONTROL_FIELDS: &[&str] = &[
    "id", "owner", "iss", "sub", "era", "tool", "status", "msg", "created", "updated", "ttl", "poll", "attempts",
    "scopes", "iserr", "reqkeys",
];

/// What a read of the outcome adds.
pub(super) const OUTCOME_FIELDS: &[&str] = &["result", "error"];

/// Pairs `names` with the values an `HMGET` of them returned, leaving out absent fields, as
/// [`decode`] takes them.
pub(super) fn decode_fields<S: AsRef<str>>(names: &[S], values: Vec<Value>) -> Vec<Value> {
    let mut pairs = Vec::with_capacity(names.len() * 2);
    for (name, value) in names.iter().zip(values) {
        if value != Value::Nil {
            pairs.push(Value::BulkString(name.as_ref().as_bytes().to_vec()));
            pairs.push(value);
        }
    }
    pairs
}

/// The keys of a parked task's outstanding requests, when `pairs` (from [`decode_fields`]) is
/// a task waiting for input whose keys are listed (answered keys are absent when read).
pub(super) fn request_keys(pairs: &[Value]) -> Option<Vec<String>> {
    let field =
        |name: &str| pairs.chunks_exact(2).find(|kv| text(&kv[0]).as_deref() == Some(name)).and_then(|kv| text(&kv[1]));
    if field("status").as_deref() != Some("input_required") {
        return None;
    }
    serde_json::from_str(&field("reqkeys")?).ok()
}

/// The `i`-th element of a script reply as text.
pub(super) fn item(values: &[Value], i: usize) -> Option<String> {
    values.get(i).and_then(text)
}

pub(super) fn parse_status(s: &str) -> Option<TaskStatus> {
    Some(match s {
        "working" => TaskStatus::Working,
        "input_required" => TaskStatus::InputRequired,
        "completed" => TaskStatus::Completed,
        "failed" => TaskStatus::Failed,
        "cancelled" => TaskStatus::Cancelled,
        _ => return None,
    })
}

/// Decodes `field, value, field, value, …` (taking the values); `None` for an empty list (no
/// such key).
pub(super) fn decode(pairs: Vec<Value>) -> Result<Option<TaskRecord>, StoreError> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut fields: HashMap<String, String> = HashMap::with_capacity(pairs.len() / 2);
    let (mut requests, mut answers, mut asked) = (RawByKey::new(), RawByKey::new(), RawByKey::new());
    // Fields not decoded here (reqm:<key>, reqkeys, ans_bytes, deferred_since, ...) are
    // bookkeeping of the scripts.
    let mut values = pairs.into_iter();
    while let (Some(k), Some(v)) = (values.next(), values.next()) {
        if let (Some(k), Some(v)) = (into_text(k), into_text(v)) {
            if let Some(key) = k.strip_prefix("req:") {
                requests.insert(key.to_owned(), v);
            } else if let Some(key) = k.strip_prefix("ans:") {
                answers.insert(key.to_owned(), v);
            } else if let Some(key) = k.strip_prefix("ask:") {
                asked.insert(key.to_owned(), v);
            } else {
                fields.insert(k, v);
            }
        }
    }
    let corrupt = |what: &str| StoreError::Corrupt { detail: format!("task record lacks a valid {what}") };
    let mut take = |name: &str| fields.remove(name);
    let number = |v: Option<String>, what: &str| v.and_then(|s| s.parse::<i64>().ok()).ok_or_else(|| corrupt(what));
    let id = take("id").and_then(|s| TaskId::parse(&s)).ok_or_else(|| corrupt("id"))?;
    let status = take("status").and_then(|s| parse_status(&s)).ok_or_else(|| corrupt("status"))?;
    let era = match take("era").as_deref() {
        Some("legacy") => Era::Legacy,
        Some("modern") => Era::Modern,
        _ => return Err(corrupt("era")),
    };
    let ttl = number(take("ttl"), "ttl")?;
    let outcome = match (take("result"), take("error")) {
        (Some(r), _) => Some(TaskOutcome::Result(r)),
        (None, Some(e)) => Some(TaskOutcome::Error(e)),
        (None, None) => None,
    };
    Ok(Some(TaskRecord {
        id,
        owner: take("owner").ok_or_else(|| corrupt("owner"))?,
        issuer: take("iss").unwrap_or_default(),
        subject: take("sub").unwrap_or_default(),
        era,
        tool: take("tool").ok_or_else(|| corrupt("tool"))?,
        // Empty when not read (see `Read`).
        arguments: take("args").unwrap_or_default(),
        capabilities: take("caps").unwrap_or_default(),
        scopes: take("scopes").map(|s| s.split_whitespace().map(str::to_owned).collect()).unwrap_or_default(),
        status,
        status_message: take("msg"),
        created_ms: u64::try_from(number(take("created"), "created")?).unwrap_or(0),
        updated_ms: u64::try_from(number(take("updated"), "updated")?).unwrap_or(0),
        ttl_ms: u64::try_from(ttl).ok(),
        poll_interval_ms: u64::try_from(number(take("poll"), "poll")?).unwrap_or(0),
        outcome,
        tool_error: take("iserr").as_deref() == Some("1"),
        attempts: u32::try_from(number(take("attempts"), "attempts")?).unwrap_or(0),
        // Left over from an earlier round only if the task ended while parked.
        input_requests: if status == TaskStatus::InputRequired { requests } else { RawByKey::new() },
        state: take("state"),
        input_responses: answers
            .into_iter()
            .map(|(key, json)| {
                let method = asked.remove(&key).unwrap_or_default();
                (key, RawAnswer { method, json })
            })
            .collect(),
    }))
}
