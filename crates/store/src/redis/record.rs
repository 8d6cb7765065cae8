//! Decoding a task record from the flat field/value list Redis returns (`HGETALL`, the tail
//! of a script's reply, or an `HMGET` of named fields), and the fields each kind of read
//! names.

use std::borrow::Cow;
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
/// keys of a parked task's outstanding requests (status first, then `reqkeys`: see
/// [`request_keys`]). Never the arguments or capabilities.
pub(super) const CONTROL_FIELDS: &[&str] = &[
    "status", "reqkeys", "id", "owner", "era", "tool", "msg", "progress", "created", "updated", "ttl", "poll", "iserr",
    "srv",
];

/// [`CONTROL_FIELDS`] and the outcome.
pub(super) const OUTCOME_FIELDS: &[&str] = &[
    "status", "reqkeys", "id", "owner", "era", "tool", "msg", "progress", "created", "updated", "ttl", "poll", "iserr",
    "srv", "result", "error",
];

/// Pairs `names` with the values an `HMGET` of them returned, leaving out absent fields, as
/// [`decode_named`] takes them (no copy of the names).
pub(super) fn decode_fields<'a, S: AsRef<str>>(
    names: &'a [S],
    values: Vec<Value>,
) -> impl Iterator<Item = (Cow<'a, str>, Value)> {
    names.iter().zip(values).filter(|(_, v)| *v != Value::Nil).map(|(n, v)| (Cow::Borrowed(n.as_ref()), v))
}

/// The keys of a parked task's outstanding requests, given the values of an `HMGET` of
/// [`CONTROL_FIELDS`]: `None` unless the task waits for input (answered keys are absent when
/// read).
pub(super) fn request_keys(values: &[Value]) -> Option<RequestKeys> {
    if values.first().and_then(text).as_deref() != Some("input_required") {
        return None;
    }
    match values.get(1).and_then(text) {
        Some(listed) => serde_json::from_str(&listed).ok().map(RequestKeys::Listed),
        None => Some(RequestKeys::Unlisted),
    }
}

/// Where a parked task's outstanding requests are found.
pub(super) enum RequestKeys {
    /// Under these keys.
    Listed(Vec<String>),
    /// Not listed: parked by a release before `reqkeys` existed; read the whole record.
    Unlisted,
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
    let mut values = pairs.into_iter();
    let mut named = Vec::with_capacity(values.len() / 2);
    while let (Some(k), Some(v)) = (values.next(), values.next()) {
        if let Some(k) = into_text(k) {
            named.push((Cow::Owned(k), v));
        }
    }
    decode_named(named)
}

/// Decodes (field, value) pairs; `None` when there are none (no such key). Fields a read did
/// not fetch are left empty (see `Read`).
pub(super) fn decode_named<'a>(
    pairs: impl IntoIterator<Item = (Cow<'a, str>, Value)>,
) -> Result<Option<TaskRecord>, StoreError> {
    let pairs = pairs.into_iter();
    let mut fields: HashMap<Cow<'a, str>, String> = HashMap::with_capacity(pairs.size_hint().0);
    let (mut requests, mut answers, mut asked) = (RawByKey::new(), RawByKey::new(), RawByKey::new());
    // Fields not decoded here (reqm:<key>, reqkeys, ans_bytes, deferred_since, ...) are
    // bookkeeping of the scripts.
    for (k, v) in pairs {
        if let Some(v) = into_text(v) {
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
    if fields.is_empty() && requests.is_empty() && answers.is_empty() {
        return Ok(None);
    }
    let corrupt = |what: &str| StoreError::corrupt(format!("task record lacks a valid {what}"));
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
        // Empty once a run finished (settle.lua blanks the last note in its one HSET).
        status_message: take("msg").filter(|m| !m.is_empty()),
        progress_ppm: take("progress").and_then(|p| p.parse().ok()).filter(|p| *p <= 1_000_000),
        created_ms: u64::try_from(number(take("created"), "created")?).unwrap_or(0),
        updated_ms: u64::try_from(number(take("updated"), "updated")?).unwrap_or(0),
        ttl_ms: u64::try_from(ttl).ok(),
        poll_interval_ms: u64::try_from(number(take("poll"), "poll")?).unwrap_or(0),
        outcome,
        tool_error: take("iserr").as_deref() == Some("1"),
        // Not read by every read (see `Read`): 0 then.
        attempts: take("attempts").and_then(|a| a.parse().ok()).unwrap_or(0),
        resumable: take("resumable").as_deref() == Some("1"),
        // Left over from an earlier round only if the task ended while parked.
        input_requests: if status == TaskStatus::InputRequired { requests } else { RawByKey::new() },
        state: take("state"),
        credential: take("cred"),
        trace: take("trace"),
        server: take("srv"),
        input_responses: answers
            .into_iter()
            .map(|(key, json)| {
                let method = asked.remove(&key).unwrap_or_default();
                (key, RawAnswer { method, json })
            })
            .collect(),
    }))
}
