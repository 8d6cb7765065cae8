//! Encryption of task payloads at rest: a task's arguments, answers, continuation state and
//! result are stored sealed, so the store holds ciphertext that only a replica with the key
//! ring can read, while the fields operators need (status, owner, tool, timestamps) stay
//! readable.
//!
//! Threat model: an attacker who reads the store (a dump, a backup, a replica of it, `MONITOR`
//! output) learns which tasks exist, their readable fields and the sizes of their payloads,
//! but no payload. One who can also write to it cannot forge a payload, nor move a sealed
//! value to another task or another field (the task id and the field name are associated
//! data), but can restore an older value of the same field of the same task. Rotation works as
//! for sealed tokens: the first key of the ring seals, every key of it opens.
//!
//! Invariants: a sealed value starts with [`MARKER`], which no JSON text, no sealed token and
//! no base64 begins with, so a value written before encryption was turned on still reads as
//! it was written; the empty value (the scripts' "none") is never sealed.

use crate::binding::{Binding, Purpose};
use crate::error::{OpenFailure, SealError};
use crate::sealer::Sealer;

/// What a sealed value begins with (a control character, then a sealed token).
pub const MARKER: &str = "\u{1}";

/// Sealed values never expire: a task's lifetime is the store's business.
const NEVER: u64 = u64::MAX;

/// No context beyond the record and the field.
const NO_CONTEXT: [u8; 32] = [0; 32];

/// Seals and opens the payload fields of stored records.
#[derive(Debug)]
pub struct AtRest {
    sealer: Sealer,
    write: bool,
}

impl AtRest {
    /// Uses `sealer`'s key ring (without its length limit: payloads may be megabytes);
    /// `write` = seal what is written (otherwise values are written as they are, and only
    /// values sealed earlier are opened).
    pub fn new(sealer: &Sealer, write: bool) -> Self {
        Self { sealer: sealer.with_max_len(usize::MAX), write }
    }

    /// Whether values are sealed when written.
    pub fn writes(&self) -> bool {
        self.write
    }

    /// `value` as it is to be stored in `field` of record `record`: sealed when writing is on
    /// and it is not empty.
    pub fn seal(&self, record: &str, field: &str, value: String) -> Result<String, SealError> {
        if !self.write {
            return Ok(value);
        }
        self.seal_always(record, field, &value)
    }

    /// `value` sealed whatever the setting (secrets such as credentials); empty stays empty.
    pub fn seal_always(&self, record: &str, field: &str, value: &str) -> Result<String, SealError> {
        if value.is_empty() {
            return Ok(String::new());
        }
        let token = self.sealer.seal(&binding(record, field), NEVER, value.as_bytes())?;
        let mut stored = String::with_capacity(MARKER.len() + token.len());
        stored.push_str(MARKER);
        stored.push_str(&token);
        Ok(stored)
    }

    /// The plaintext of a value read from `field` of record `record`: opened if sealed, as
    /// read otherwise.
    pub fn open(&self, record: &str, field: &str, stored: String) -> Result<String, SealError> {
        let Some(token) = stored.strip_prefix(MARKER) else { return Ok(stored) };
        let plain = self.sealer.open(&binding(record, field), 0, token)?;
        String::from_utf8(plain).map_err(|_| OpenFailure::Malformed.into())
    }

    /// Whether a stored value is sealed.
    pub fn is_sealed(stored: &str) -> bool {
        stored.starts_with(MARKER)
    }
}

fn binding<'a>(record: &'a str, field: &'a str) -> Binding<'a> {
    Binding { purpose: Purpose::AtRest, principal: record, method: field, context: &NO_CONTEXT }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::KeyRing;

    fn ring(specs: &[&str]) -> Sealer {
        Sealer::new(KeyRing::parse(specs).expect("ring"), 64)
    }

    const OLD: &str = "old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    const NEW: &str = "new:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";

    #[test]
    fn sealed_values_open_only_in_their_record_and_field() {
        let at_rest = AtRest::new(&ring(&[OLD]), true);
        // Longer than the sealer's own token limit: payloads are not bounded by it.
        let args = format!("{{\"secret\":\"{}\"}}", "x".repeat(500));
        let stored = at_rest.seal("t01-a", "args", args.clone()).expect("seal");
        assert!(AtRest::is_sealed(&stored));
        assert!(!stored.contains("secret"));
        assert_eq!(at_rest.open("t01-a", "args", stored.clone()).expect("open"), args);
        assert!(at_rest.open("t01-b", "args", stored.clone()).is_err(), "another task");
        assert!(at_rest.open("t01-a", "result", stored).is_err(), "another field");
    }

    #[test]
    fn plaintext_and_empty_values_pass_through() {
        let at_rest = AtRest::new(&ring(&[OLD]), true);
        assert_eq!(at_rest.seal("t", "state", String::new()).expect("seal"), "");
        assert_eq!(at_rest.open("t", "args", "{\"a\":1}".to_owned()).expect("open"), "{\"a\":1}");
        let off = AtRest::new(&ring(&[OLD]), false);
        assert_eq!(off.seal("t", "args", "{}".to_owned()).expect("seal"), "{}");
        // Values sealed while writing was on still open once it is off.
        let sealed = at_rest.seal("t", "args", "{}".to_owned()).expect("seal");
        assert_eq!(off.open("t", "args", sealed).expect("open"), "{}");
        assert!(AtRest::is_sealed(&off.seal_always("t", "cred", "token").expect("seal")));
    }

    #[test]
    fn values_sealed_before_a_rotation_still_open() {
        let before = AtRest::new(&ring(&[OLD]), true);
        let stored = before.seal("t", "result", "{\"ok\":true}".to_owned()).expect("seal");
        let after = AtRest::new(&ring(&[NEW, OLD]), true);
        assert_eq!(after.open("t", "result", stored.clone()).expect("open"), "{\"ok\":true}");
        assert!(after.seal("t", "result", "{}".to_owned()).expect("seal").starts_with("\u{1}v1.new."));
        let retired = AtRest::new(&ring(&[NEW]), true);
        assert!(retired.open("t", "result", stored).is_err());
    }
}
