//! `pin` on an `[[upstream]]`: whether its tool definitions are pinned (rug-pull protection),
//! and how the first approved set is decided.
//!
//! Invariant: TOML spells it `false | true | "first-seen"` and nothing else; `false` (the
//! default) pins nothing.

use std::fmt;

use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// How an upstream's tool definitions are pinned.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum PinMode {
    /// Not pinned: whatever the upstream lists is served.
    #[default]
    Off,
    /// Pinned, and nothing is approved until an operator approves it: until then every tool
    /// of the upstream waits.
    Approve,
    /// Pinned, and the first definitions any replica sees are approved (once, for the fleet).
    FirstSeen,
}

impl PinMode {
    /// Whether the upstream's definitions are pinned at all.
    pub fn is_pinned(self) -> bool {
        self != Self::Off
    }

    /// Its name in logs and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "false",
            Self::Approve => "true",
            Self::FirstSeen => "first-seen",
        }
    }
}

impl Serialize for PinMode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Off => serializer.serialize_bool(false),
            Self::Approve => serializer.serialize_bool(true),
            Self::FirstSeen => serializer.serialize_str("first-seen"),
        }
    }
}

impl<'de> Deserialize<'de> for PinMode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PinVisitor;

        impl Visitor<'_> for PinVisitor {
            type Value = PinMode;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("false, true or \"first-seen\"")
            }

            fn visit_bool<E: de::Error>(self, v: bool) -> Result<PinMode, E> {
                Ok(if v { PinMode::Approve } else { PinMode::Off })
            }

            fn visit_str<E: de::Error>(self, v: &str) -> Result<PinMode, E> {
                match v {
                    "first-seen" => Ok(PinMode::FirstSeen),
                    // Environment overrides and JSON configs may spell the booleans as text.
                    "true" => Ok(PinMode::Approve),
                    "false" => Ok(PinMode::Off),
                    other => Err(E::invalid_value(de::Unexpected::Str(other), &self)),
                }
            }
        }

        deserializer.deserialize_any(PinVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::PinMode;

    #[derive(serde::Deserialize)]
    struct Table {
        pin: PinMode,
    }

    #[test]
    fn spelled_false_true_or_first_seen() {
        let read = |text: &str| serde_json::from_str::<Table>(text).map(|t| t.pin);
        assert_eq!(read(r#"{"pin": false}"#).ok(), Some(PinMode::Off));
        assert_eq!(read(r#"{"pin": true}"#).ok(), Some(PinMode::Approve));
        assert_eq!(read(r#"{"pin": "first-seen"}"#).ok(), Some(PinMode::FirstSeen));
        let err = read(r#"{"pin": "first"}"#).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("first-seen"), "the error says what is accepted: {err}");
        assert!(read(r#"{"pin": 1}"#).is_err());
    }
}
