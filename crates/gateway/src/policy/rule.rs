//! One `[[policy]]` table as the operator wrote it: a named CEL condition and the effect it
//! has when it holds (the config holds them; the engine compiles them).
//!
//! Invariant: only the text lives here; what it means is decided once, at start-up, by
//! the policy engine ([`super::Policy::from_rules`]), which refuses a rule that does not
//! parse or names a variable or function that does not exist.

use serde::{Deserialize, Serialize};

/// A `[[policy]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyRule {
    /// Unique name: in the error a denied caller sees, the metric label and the audit trail.
    pub name: String,
    /// A CEL expression that evaluates to a boolean.
    pub when: String,
    /// What happens when `when` holds.
    pub effect: Effect,
    /// What a denied caller is told (default: `denied by policy rule "<name>"`).
    #[serde(default)]
    pub message: Option<String>,
}

impl PolicyRule {
    /// A rule with no message of its own.
    pub fn new(name: &str, when: &str, effect: Effect) -> Self {
        Self { name: name.to_owned(), when: when.to_owned(), effect, message: None }
    }

    /// The same rule with a message for denied callers.
    pub fn with_message(mut self, message: &str) -> Self {
        self.message = Some(message.to_owned());
        self
    }
}

/// Whether a use is allowed or denied.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Effect {
    /// The use may go ahead.
    Allow,
    /// The use is refused.
    Deny,
}

impl Effect {
    /// The stable lowercase name (`allow` / `deny`), as in config and audit events.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }
}
