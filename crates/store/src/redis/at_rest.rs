//! The payload fields of a task record kept sealed in Redis (see [`mcpgate_seal::AtRest`]):
//! `args`, `state`, `result`, `error`, `ans:<key>`, and `cred` (always sealed: the caller's
//! credential). Everything
//! else (status, owner, tool, timestamps, input requests) stays readable for operators and
//! for the scripts, none of which ever reads a payload.
//!
//! Invariant: every write of a payload field goes through [`Payloads::seal`] and every
//! record handed out of the store has been through [`Payloads::open`]; a sealed value bound
//! to one task and field opens nowhere else.

use std::sync::Arc;

use mcpgate_seal::{AtRest, SealError};

use crate::error::StoreError;
use crate::model::{TaskId, TaskOutcome, TaskRecord};

/// The store's sealing of payload fields: `None` writes them as they are and cannot open
/// sealed ones.
#[derive(Debug, Clone, Default)]
pub(super) struct Payloads(Option<Arc<AtRest>>);

impl Payloads {
    pub(super) fn new(at_rest: Option<Arc<AtRest>>) -> Self {
        Self(at_rest)
    }

    /// `value` as `field` of task `id` is to be stored.
    pub(super) fn seal(&self, id: &TaskId, field: &str, value: String) -> Result<String, StoreError> {
        match &self.0 {
            Some(at_rest) => at_rest.seal(id.as_str(), field, value).map_err(|e| failure(field, "sealed", &e)),
            None => Ok(value),
        }
    }

    /// The answer to input request `key` as stored.
    pub(super) fn seal_answer(&self, id: &TaskId, key: &str, value: String) -> Result<String, StoreError> {
        if self.0.as_ref().is_none_or(|a| !a.writes()) {
            return Ok(value);
        }
        self.seal(id, &format!("ans:{key}"), value)
    }

    /// A secret (the caller's credential) as stored in `field`: sealed whatever the setting;
    /// without a key ring it is refused rather than stored in plain text.
    pub(super) fn seal_secret(&self, id: &TaskId, field: &str, value: &str) -> Result<String, StoreError> {
        match &self.0 {
            Some(at_rest) => at_rest.seal_always(id.as_str(), field, value).map_err(|e| failure(field, "sealed", &e)),
            None => Err(StoreError::Sealing {
                field: field.to_owned(),
                action: "sealed",
                reason: "a credential is only stored sealed, and this store has no key ring".to_owned(),
            }),
        }
    }

    /// `record` with its payload fields opened (a record read with less than `Read::Full`
    /// has only those it fetched).
    pub(super) fn open(&self, mut record: TaskRecord) -> Result<TaskRecord, StoreError> {
        // Disjoint borrows: no copy of the id on every read (most reads carry no payload).
        let TaskRecord { id, arguments, state, credential, outcome, input_responses, .. } = &mut record;
        let open = |field: &str, value: &mut String| -> Result<(), StoreError> {
            if AtRest::is_sealed(value) {
                *value = self.open_field(id, field, std::mem::take(value))?;
            }
            Ok(())
        };
        open("args", arguments)?;
        if let Some(state) = state {
            open("state", state)?;
        }
        if let Some(credential) = credential {
            open("cred", credential)?;
        }
        match outcome {
            Some(TaskOutcome::Result(r)) => open("result", r)?,
            Some(TaskOutcome::Error(e)) => open("error", e)?,
            None => {}
        }
        for (key, answer) in input_responses.iter_mut().filter(|(_, a)| AtRest::is_sealed(&a.json)) {
            open(&format!("ans:{key}"), &mut answer.json)?;
        }
        Ok(record)
    }

    /// [`Payloads::open`] of a record that may not exist.
    pub(super) fn open_found(&self, record: Option<TaskRecord>) -> Result<Option<TaskRecord>, StoreError> {
        record.map(|r| self.open(r)).transpose()
    }

    fn open_field(&self, id: &TaskId, field: &str, value: String) -> Result<String, StoreError> {
        if !AtRest::is_sealed(&value) {
            return Ok(value);
        }
        match &self.0 {
            Some(at_rest) => at_rest.open(id.as_str(), field, value).map_err(|e| failure(field, "opened", &e)),
            None => Err(StoreError::Sealing {
                field: field.to_owned(),
                action: "opened",
                reason: "it is sealed and this replica has no key ring for the store".to_owned(),
            }),
        }
    }
}

/// The error for `field`: the seal error's opaque text plus, for an open, its reason (a key
/// no longer in the ring is the one an operator can act on).
fn failure(field: &str, action: &'static str, e: &SealError) -> StoreError {
    let reason = match e.open_failure() {
        Some(mcpgate_seal::OpenFailure::UnknownKey) => "sealed with a key no longer in seal.keys".to_owned(),
        Some(other) => format!("{e} ({other:?})"),
        None => e.to_string(),
    };
    StoreError::Sealing { field: field.to_owned(), action, reason }
}
