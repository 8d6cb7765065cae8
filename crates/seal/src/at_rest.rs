//! Encryption of task payloads at rest: a task's arguments, answers, continuation state and
//! result are stored sealed, so the store holds ciphertext that only a replica with the key
//! ring can read, while the fields operators need (status, owner, tool, timestamps) stay
//! readable.
//!
//! Threat model: an attacker who reads the store (a dump, a backup, a replica of it, `MONITOR`
//! output) learns which tasks exist, their readable fields and the sizes of their payloads,
//! but no payload. One who can also write to it cannot forge a payload, nor move a sealed
//! value to another task or another field, nor make it open for another owner, era, tool (or
//! error flag): the record's id and those readable fields are folded into a
//! [`RecordBinding`] that is associated data of every value. They can restore an older value
//! of the same field of the same task, and they can write a plain value: refusing plain
//! values (and values of the older format) where only the current format may be is the
//! store's policy, which [`AtRest::format`] lets it apply. Rotation works as for sealed
//! tokens: the first key of the ring seals, every key of it opens.
//!
//! Invariants: a value sealed now starts with [`MARKER`]; one sealed by releases before the
//! record binding starts with [`LEGACY_MARKER`] and is bound to the record id and field only.
//! Neither control character begins any JSON text, sealed token or base64, so a value
//! written before encryption was turned on still reads as it was written; the empty value
//! (the scripts' "none") is never sealed.

use crate::binding::{Binding, Purpose, context_digest};
use crate::error::{OpenFailure, SealError};
use crate::sealer::Sealer;

/// What a value sealed in the current format begins with (a control character, then a
/// sealed token).
pub const MARKER: &str = "\u{2}";

/// What a value sealed by releases before the record binding begins with: it is bound to the
/// record id and the field only.
pub const LEGACY_MARKER: &str = "\u{1}";

/// Sealed values never expire: a task's lifetime is the store's business.
const NEVER: u64 = u64::MAX;

/// The context of [`LEGACY_MARKER`] values: none beyond the record and the field.
const NO_CONTEXT: [u8; 32] = [0; 32];

/// Domain label of a [`RecordBinding`] digest.
const RECORD_LABEL: &[u8] = b"mcpgate/at-rest/record/2";

/// How a stored value was written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// As it is (sealing off, or written before sealing existed); also the empty value.
    Plain,
    /// Sealed by a release before the record binding ([`LEGACY_MARKER`]).
    Legacy,
    /// Sealed in the current format ([`MARKER`]).
    Current,
}

/// What every value of one record is bound to besides its field: a digest of the record's id
/// and of the readable fields that decide who may read its payloads and how they are
/// rendered (for a task: owner, era, tool). Computed once per record; rewriting any of those
/// fields makes every value sealed under the old ones fail to open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordBinding([u8; 32]);

impl RecordBinding {
    /// The binding of record `record` with these readable `facets`, in a fixed order.
    pub fn new(record: &str, facets: &[&str]) -> Self {
        let mut parts: Vec<&[u8]> = Vec::with_capacity(2 + facets.len());
        parts.push(RECORD_LABEL);
        parts.push(record.as_bytes());
        parts.extend(facets.iter().map(|f| f.as_bytes()));
        Self(context_digest(&parts))
    }
}

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

    /// `value` as it is to be stored in `field` of record `record` bound by `binding`: sealed
    /// when writing is on and it is not empty.
    pub fn seal(&self, record: &str, binding: &RecordBinding, field: &str, value: String) -> Result<String, SealError> {
        if !self.write {
            return Ok(value);
        }
        self.seal_always(record, binding, field, &value)
    }

    /// `value` sealed whatever the setting (secrets such as credentials); empty stays empty.
    pub fn seal_always(
        &self,
        record: &str,
        binding: &RecordBinding,
        field: &str,
        value: &str,
    ) -> Result<String, SealError> {
        if value.is_empty() {
            return Ok(String::new());
        }
        let token = self.sealer.seal(&current(record, binding, field), NEVER, value.as_bytes())?;
        let mut stored = String::with_capacity(MARKER.len() + token.len());
        stored.push_str(MARKER);
        stored.push_str(&token);
        Ok(stored)
    }

    /// The plaintext of a value read from `field` of record `record` bound by `binding`:
    /// opened if sealed (in either format), as read otherwise. Whether a plain or
    /// [`Format::Legacy`] value is acceptable there is for the caller to decide first.
    pub fn open(
        &self,
        record: &str,
        binding: &RecordBinding,
        field: &str,
        stored: String,
    ) -> Result<String, SealError> {
        let plain = if let Some(token) = stored.strip_prefix(MARKER) {
            self.sealer.open(&current(record, binding, field), 0, token)?
        } else if let Some(token) = stored.strip_prefix(LEGACY_MARKER) {
            let legacy = Binding { purpose: Purpose::AtRest, principal: record, method: field, context: &NO_CONTEXT };
            self.sealer.open(&legacy, 0, token)?
        } else {
            return Ok(stored);
        };
        String::from_utf8(plain).map_err(|_| OpenFailure::Malformed.into())
    }

    /// How a stored value was written.
    pub fn format(stored: &str) -> Format {
        if stored.starts_with(MARKER) {
            Format::Current
        } else if stored.starts_with(LEGACY_MARKER) {
            Format::Legacy
        } else {
            Format::Plain
        }
    }

    /// Whether a stored value is sealed (in either format).
    pub fn is_sealed(stored: &str) -> bool {
        Self::format(stored) != Format::Plain
    }
}

/// The associated data of a current-format value. The context is the record binding, never
/// [`NO_CONTEXT`] (a digest), so neither format's value opens as the other's.
fn current<'a>(record: &'a str, binding: &'a RecordBinding, field: &'a str) -> Binding<'a> {
    Binding { purpose: Purpose::AtRest, principal: record, method: field, context: &binding.0 }
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

    fn alice(record: &str) -> RecordBinding {
        RecordBinding::new(record, &["alice", "modern", "tool"])
    }

    #[test]
    fn sealed_values_open_only_in_their_record_field_and_binding() {
        let at_rest = AtRest::new(&ring(&[OLD]), true);
        // Longer than the sealer's own token limit: payloads are not bounded by it.
        let args = format!("{{\"secret\":\"{}\"}}", "x".repeat(500));
        let stored = at_rest.seal("t01-a", &alice("t01-a"), "args", args.clone()).expect("seal");
        assert_eq!(AtRest::format(&stored), Format::Current);
        assert!(!stored.contains("secret"));
        assert_eq!(at_rest.open("t01-a", &alice("t01-a"), "args", stored.clone()).expect("open"), args);
        assert!(at_rest.open("t01-b", &alice("t01-b"), "args", stored.clone()).is_err(), "another task");
        assert!(at_rest.open("t01-a", &alice("t01-a"), "result", stored.clone()).is_err(), "another field");
        for other in [["mallory", "modern", "tool"], ["alice", "legacy", "tool"], ["alice", "modern", "other"]] {
            let binding = RecordBinding::new("t01-a", &other);
            assert!(at_rest.open("t01-a", &binding, "args", stored.clone()).is_err(), "{other:?}");
        }
        // Relabelled as the older format, it does not open either.
        let relabelled = stored.replacen(MARKER, LEGACY_MARKER, 1);
        assert!(at_rest.open("t01-a", &alice("t01-a"), "args", relabelled).is_err());
    }

    #[test]
    fn values_of_the_older_format_still_open_in_their_record_and_field() {
        let sealer = ring(&[OLD]);
        let legacy = Binding { purpose: Purpose::AtRest, principal: "t01-a", method: "result", context: &NO_CONTEXT };
        let stored =
            format!("{LEGACY_MARKER}{}", sealer.with_max_len(usize::MAX).seal(&legacy, NEVER, b"{}").expect("seal"));
        let at_rest = AtRest::new(&sealer, true);
        assert_eq!(AtRest::format(&stored), Format::Legacy);
        assert!(AtRest::is_sealed(&stored));
        assert_eq!(at_rest.open("t01-a", &alice("t01-a"), "result", stored.clone()).expect("open"), "{}");
        assert!(at_rest.open("t01-b", &alice("t01-b"), "result", stored.clone()).is_err(), "another task");
        // Relabelled as the current format, it does not open.
        let relabelled = stored.replacen(LEGACY_MARKER, MARKER, 1);
        assert!(at_rest.open("t01-a", &alice("t01-a"), "result", relabelled).is_err());
    }

    #[test]
    fn plaintext_and_empty_values_pass_through() {
        let at_rest = AtRest::new(&ring(&[OLD]), true);
        let b = alice("t");
        assert_eq!(at_rest.seal("t", &b, "state", String::new()).expect("seal"), "");
        assert_eq!(AtRest::format(""), Format::Plain);
        assert_eq!(at_rest.open("t", &b, "args", "{\"a\":1}".to_owned()).expect("open"), "{\"a\":1}");
        let off = AtRest::new(&ring(&[OLD]), false);
        assert_eq!(off.seal("t", &b, "args", "{}".to_owned()).expect("seal"), "{}");
        // Values sealed while writing was on still open once it is off.
        let sealed = at_rest.seal("t", &b, "args", "{}".to_owned()).expect("seal");
        assert_eq!(off.open("t", &b, "args", sealed).expect("open"), "{}");
        assert!(AtRest::is_sealed(&off.seal_always("t", &b, "cred", "token").expect("seal")));
    }

    #[test]
    fn values_sealed_before_a_rotation_still_open() {
        let b = alice("t");
        let before = AtRest::new(&ring(&[OLD]), true);
        let stored = before.seal("t", &b, "result", "{\"ok\":true}".to_owned()).expect("seal");
        let after = AtRest::new(&ring(&[NEW, OLD]), true);
        assert_eq!(after.open("t", &b, "result", stored.clone()).expect("open"), "{\"ok\":true}");
        assert!(after.seal("t", &b, "result", "{}".to_owned()).expect("seal").starts_with("\u{2}v1.new."));
        let retired = AtRest::new(&ring(&[NEW]), true);
        assert!(retired.open("t", &b, "result", stored).is_err());
    }
}
