//! Results relayed from another server as it sent them: the top-level members of a result
//! object kept as raw JSON, so a gateway forwards content it has no type for (new content
//! kinds, extension members) byte for byte, and never pays for parsing what it only passes on.
//!
//! Invariant: `isError`, `resultType` and `_meta` are never among the raw members: the typed
//! fields of the result carry them, so a relaying server sets its own envelope members
//! without ever writing a member twice.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::value::RawValue;

/// The members of a relayed result object other than `isError`, `resultType` and `_meta`.
#[derive(Debug, Clone)]
pub struct RawMembers(pub(crate) BTreeMap<String, Box<RawValue>>);

impl PartialEq for RawMembers {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self.0.iter().zip(&other.0).all(|((a, x), (b, y))| a == b && x.get() == y.get())
    }
}

/// What a relayed result object holds.
#[derive(Debug)]
pub struct Relayed {
    /// Its members but the envelope ones.
    pub members: RawMembers,
    /// `isError`, when it is a boolean.
    pub is_error: Option<bool>,
    /// `resultType`, as sent (absent in 2025-era results).
    pub result_type: Option<String>,
}

impl RawMembers {
    /// Splits a result object (`Err` when it is not a JSON object, or its envelope members
    /// have the wrong types). Only the top level is parsed.
    pub fn split(json: &str) -> Result<Relayed, serde_json::Error> {
        let mut members: BTreeMap<String, Box<RawValue>> = serde_json::from_str(json)?;
        let is_error = members.remove("isError").map(|v| bool::deserialize(&*v)).transpose()?;
        let result_type = members.remove("resultType").map(|v| String::deserialize(&*v)).transpose()?;
        members.remove("_meta");
        Ok(Relayed { members: Self(members), is_error, result_type })
    }

    /// Whether a member of this name is present.
    pub fn has(&self, name: &str) -> bool {
        self.0.contains_key(name)
    }

    /// The raw JSON of a member.
    pub fn get(&self, name: &str) -> Option<&RawValue> {
        self.0.get(name).map(AsRef::as_ref)
    }
}

#[cfg(test)]
mod tests {
    use super::RawMembers;

    #[test]
    fn splits_the_envelope_from_the_members() {
        let r = RawMembers::split(
            r#"{"content":[{"type":"hologram","x":1}],"isError":true,"resultType":"complete","_meta":{"a":1},"ext":2}"#,
        )
        .unwrap();
        assert_eq!((r.is_error, r.result_type.as_deref()), (Some(true), Some("complete")));
        assert!(r.members.has("content") && r.members.has("ext") && !r.members.has("_meta"));
        assert_eq!(r.members.0["content"].get(), r#"[{"type":"hologram","x":1}]"#);
        assert!(RawMembers::split("[1]").is_err());
        assert!(RawMembers::split(r#"{"isError":"yes"}"#).is_err());
    }
}
