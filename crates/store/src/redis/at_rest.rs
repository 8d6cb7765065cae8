//! The payload fields of a task record kept sealed in Redis (see [`mcpgate_seal::AtRest`]):
//! `args`, `state`, `result`, `error`, `ans:<key>`, and `cred` (always sealed: the caller's
//! credential). Everything else (status, owner, tool, timestamps, input requests) stays
//! readable for operators and for the scripts, none of which ever reads a payload.
//!
//! Threat model: someone who can write to Redis but holds no key. Each value is bound to its
//! task, its field and the readable fields that decide who reads it and how (owner, era,
//! tool, and for a result the `isError` flag; an answer, written before the record is read,
//! to its task and owner only), so rewriting any of them makes the value fail to open rather
//! than serve one principal's payload to another. With sealing on, a plain value (or one
//! sealed the older way, bound to task and field only) is refused in a task created at or
//! after the cutover: the first replica started with sealing on records it in the store
//! (`<p>:at-rest:cutover`, its start plus the migration window) and every replica reads it
//! once, at start-up, so refusing costs no round trip. Left open: the readable fields
//! themselves (status, `created`), restoring an older value of the same field, and deleting
//! the cutover (the next replica to start records a new one, which reopens the window for
//! the tasks already stored).
//!
//! Invariant: every write of a payload field goes through [`Payloads`]' seal methods and every
//! record handed out of the store has been through [`Payloads::open`]; a sealed value bound
//! to one task, field, owner, era and tool opens nowhere else.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use mcpgate_protocol::Era;
use mcpgate_seal::{AtRest, AtRestFormat as Format, RecordBinding, SealError};

use super::{RedisStore, Retry, era_name, reply, scripts};
use crate::clock::millis;
use crate::error::StoreError;
use crate::model::{TaskId, TaskOutcome, TaskRecord};

/// The store's sealing of payload fields: `None` writes them as they are and cannot open
/// sealed ones.
#[derive(Debug, Default)]
pub(super) struct Payloads {
    at_rest: Option<Arc<AtRest>>,
    /// Store-clock ms from which a record holds only current-format values, when sealing is
    /// on (set once, at connect; unset = every record).
    cutover: OnceLock<u64>,
}

impl Payloads {
    pub(super) fn new(at_rest: Option<Arc<AtRest>>) -> Self {
        Self { at_rest, cutover: OnceLock::new() }
    }

    /// What the values of task `id` are bound to.
    pub(super) fn binding(id: &TaskId, owner: &str, era: Era, tool: &str) -> RecordBinding {
        RecordBinding::new(id.as_str(), &[owner, era_name(era), tool])
    }

    /// [`Payloads::binding`] of a record as read.
    pub(super) fn binding_of(record: &TaskRecord) -> RecordBinding {
        Self::binding(&record.id, &record.owner, record.era, &record.tool)
    }

    /// What the answers of task `id` are bound to: its owner (an answer is recorded by owner
    /// and task id, without reading the record first).
    fn answer_binding(id: &TaskId, owner: &str) -> RecordBinding {
        RecordBinding::new(id.as_str(), &[owner])
    }

    /// The name a result is sealed under: the `isError` flag decides how it is rendered.
    pub(super) fn result_field(tool_error: bool) -> &'static str {
        if tool_error { "result+isError" } else { "result" }
    }

    /// `value` as `field` of task `id` (bound by `binding`) is to be stored; `bound_as` is
    /// the name it is sealed under (the field's, but for a result, see
    /// [`Payloads::result_field`]).
    pub(super) fn seal(
        &self,
        id: &TaskId,
        binding: &RecordBinding,
        field: &str,
        value: String,
    ) -> Result<String, StoreError> {
        self.seal_as(id, binding, field, field, value)
    }

    /// [`Payloads::seal`] under another name than the field's.
    pub(super) fn seal_as(
        &self,
        id: &TaskId,
        binding: &RecordBinding,
        field: &str,
        bound_as: &str,
        value: String,
    ) -> Result<String, StoreError> {
        match &self.at_rest {
            Some(at_rest) => {
                at_rest.seal(id.as_str(), binding, bound_as, value).map_err(|e| failure(field, "sealed", &e))
            }
            None => Ok(value),
        }
    }

    /// The answer to input request `key` of `owner`'s task `id` as stored.
    pub(super) fn seal_answer(&self, id: &TaskId, owner: &str, key: &str, value: String) -> Result<String, StoreError> {
        if self.at_rest.as_ref().is_none_or(|a| !a.writes()) {
            return Ok(value);
        }
        self.seal(id, &Self::answer_binding(id, owner), &format!("ans:{key}"), value)
    }

    /// A secret (the caller's credential) as stored in `field`: sealed whatever the setting;
    /// without a key ring it is refused rather than stored in plain text.
    pub(super) fn seal_secret(
        &self,
        id: &TaskId,
        binding: &RecordBinding,
        field: &str,
        value: &str,
    ) -> Result<String, StoreError> {
        match &self.at_rest {
            Some(at_rest) => {
                at_rest.seal_always(id.as_str(), binding, field, value).map_err(|e| failure(field, "sealed", &e))
            }
            None => Err(StoreError::Sealing {
                field: field.to_owned(),
                action: "sealed",
                reason: "a credential is only stored sealed, and this store has no key ring".to_owned(),
                source: None,
            }),
        }
    }

    /// `record` with its payload fields opened (a record read with less than `Read::Full`
    /// has only those it fetched); a value in a form the record may not hold is refused.
    pub(super) fn open(&self, mut record: TaskRecord) -> Result<TaskRecord, StoreError> {
        // Disjoint borrows: no copy of the id on every read (most reads carry no payload).
        let TaskRecord {
            id,
            owner,
            era,
            tool,
            created_ms,
            tool_error,
            arguments,
            state,
            credential,
            outcome,
            input_responses,
            ..
        } = &mut record;
        let mut opening = Opening {
            payloads: self,
            id,
            older: self.accepts_older(*created_ms),
            facets: (owner, *era, tool),
            record: None,
            answers: None,
        };
        opening.open("args", "args", Bound::Record, arguments)?;
        if let Some(state) = state {
            opening.open("state", "state", Bound::Record, state)?;
        }
        if let Some(credential) = credential {
            // Never written in plain by any release: a plain one was planted.
            if !credential.is_empty() && AtRest::format(credential) == Format::Plain {
                return Err(refused("cred", "it is not sealed, and a credential is only ever stored sealed"));
            }
            opening.open("cred", "cred", Bound::Record, credential)?;
        }
        match outcome {
            Some(TaskOutcome::Result(r)) => {
                opening.open("result", Self::result_field(*tool_error), Bound::Record, r)?
            }
            // What claim.lua writes when a task runs out of attempts carries nothing a tool or
            // client wrote: it reads in plain whatever the record's age.
            Some(TaskOutcome::Error(e)) if is_store_authored(e) => {}
            Some(TaskOutcome::Error(e)) => opening.open("error", "error", Bound::Record, e)?,
            None => {}
        }
        for (key, answer) in input_responses.iter_mut() {
            if opening.needs_work(&answer.json) {
                let field = format!("ans:{key}");
                opening.open(&field, &field, Bound::Answers, &mut answer.json)?;
            }
        }
        Ok(record)
    }

    /// [`Payloads::open`] of a record that may not exist.
    pub(super) fn open_found(&self, record: Option<TaskRecord>) -> Result<Option<TaskRecord>, StoreError> {
        record.map(|r| self.open(r)).transpose()
    }

    /// Whether a record created at `created_ms` may hold plain values and values sealed the
    /// older way: always when this replica does not seal, else only before the cutover.
    fn accepts_older(&self, created_ms: u64) -> bool {
        match &self.at_rest {
            Some(at_rest) if at_rest.writes() => self.cutover.get().is_some_and(|cutover| created_ms < *cutover),
            _ => true,
        }
    }
}

/// Which binding a value was sealed under.
#[derive(Clone, Copy)]
enum Bound {
    /// The record's (id, owner, era, tool).
    Record,
    /// The answers' (id, owner).
    Answers,
}

/// The opening of one record's values: its bindings are computed once, and only if a value
/// needs one.
struct Opening<'a> {
    payloads: &'a Payloads,
    id: &'a TaskId,
    /// Plain values and values sealed the older way are accepted.
    older: bool,
    facets: (&'a str, Era, &'a str),
    record: Option<RecordBinding>,
    answers: Option<RecordBinding>,
}

impl Opening<'_> {
    /// Whether `value` is anything but a plain value this record may hold as it is.
    fn needs_work(&self, value: &str) -> bool {
        !(value.is_empty() || (self.older && AtRest::format(value) == Format::Plain))
    }

    /// Opens `value` of `field` in place; `bound_as` is the name a current-format value was
    /// sealed under (the older format always used the field's name).
    fn open(&mut self, field: &str, bound_as: &str, bound: Bound, value: &mut String) -> Result<(), StoreError> {
        if !self.needs_work(value) {
            return Ok(());
        }
        let format = AtRest::format(value);
        match format {
            Format::Plain => return Err(refused(field, "it is not sealed, in a task created after the cutover")),
            Format::Legacy if !self.older => {
                return Err(refused(field, "it is sealed the older way, in a task created after the cutover"));
            }
            _ => {}
        }
        let Some(at_rest) = &self.payloads.at_rest else {
            return Err(StoreError::Sealing {
                field: field.to_owned(),
                action: "opened",
                reason: "it is sealed and this replica has no key ring for the store".to_owned(),
                source: None,
            });
        };
        let (id, (owner, era, tool)) = (self.id, self.facets);
        let binding = match bound {
            Bound::Record => *self.record.get_or_insert_with(|| Payloads::binding(id, owner, era, tool)),
            Bound::Answers => *self.answers.get_or_insert_with(|| Payloads::answer_binding(id, owner)),
        };
        let name = if format == Format::Current { bound_as } else { field };
        *value = at_rest
            .open(id.as_str(), &binding, name, std::mem::take(value))
            .map_err(|e| failure(field, "opened", &e))?;
        Ok(())
    }
}

/// Whether `error` is exactly what `claim.lua` records for a task out of attempts.
fn is_store_authored(error: &str) -> bool {
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Exhausted {
        code: i64,
        message: String,
    }
    const BEFORE: &str = "Task failed: its executor stopped before finishing, ";
    // Short: checked before any decoding.
    if error.len() > 120 || AtRest::format(error) != Format::Plain {
        return false;
    }
    serde_json::from_str::<Exhausted>(error).is_ok_and(|e| {
        e.code == -32603
            && e.message
                .strip_prefix(BEFORE)
                .and_then(|rest| rest.strip_suffix(" times"))
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// The error for a value refused for its form, naming why (never any of the value).
fn refused(field: &str, why: &str) -> StoreError {
    StoreError::Sealing { field: field.to_owned(), action: "opened", reason: why.to_owned(), source: None }
}

/// The error for `field`, the seal error kept as its source (its text is opaque by design), and
/// for an open the precise reason in the store's words (a key no longer in the ring is the one
/// an operator can act on).
fn failure(field: &str, action: &'static str, e: &SealError) -> StoreError {
    let reason = match e.open_failure() {
        Some(mcpgate_seal::OpenFailure::UnknownKey) => "sealed with a key no longer in seal.keys".to_owned(),
        Some(other) => format!("it did not open ({other:?})"),
        None => "the sealer refused it".to_owned(),
    };
    StoreError::Sealing { field: field.to_owned(), action, reason, source: Some(Box::new(e.clone())) }
}

impl RedisStore {
    /// At connect: with sealing on, records the cutover if no replica has (`window` from
    /// now) and keeps it; with sealing off, forgets it, so that turning sealing on again
    /// starts a new window (the tasks written in plain meanwhile stay readable).
    pub(super) async fn settle_cutover(&self, window: Duration) -> Result<(), StoreError> {
        let Some(at_rest) = &self.inner.payloads.at_rest else { return Ok(()) };
        let key = self.inner.keys.at_rest_cutover();
        if !at_rest.writes() {
            let mut cmd = redis::cmd("DEL");
            cmd.arg(&key);
            let _: i64 = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
            return Ok(());
        }
        let window = millis(window);
        let out = reply(self.script(Retry::Yes, &scripts::CUTOVER, vec![key], vec![window.to_string()]).await?)?;
        let number = |i: usize| match out.get(i) {
            Some(redis::Value::Int(n)) => u64::try_from(*n).ok(),
            _ => None,
        };
        let (Some(at), Some(now)) = (number(0), number(1)) else {
            return Err(StoreError::corrupt("unexpected cutover reply"));
        };
        // Never later than a window from now: a cutover set far ahead (by hand, or by someone
        // with write access) does not keep plain values acceptable.
        let cutover = at.min(now.saturating_add(window));
        let _ = self.inner.payloads.cutover.set(cutover);
        // News only while the migration window is open (plain payloads written by replicas
        // with store.encrypt_at_rest = false are still accepted); after it, routine.
        if cutover > now {
            tracing::info!(
                window_left_secs = (cutover - now).div_ceil(1000),
                "encryption at rest: tasks created from now on may still hold plain payloads (written by replicas \
                 with store.encrypt_at_rest = false) for the rest of the migration window \
                 (store.at_rest_window_secs); after it, only sealed ones are read (docs/operations.md, \
                 \"Encryption at rest\")"
            );
        } else {
            tracing::debug!(
                cutover_ms = cutover,
                "encryption at rest: every task created from the cutover on is sealed"
            );
        }
        Ok(())
    }
}
