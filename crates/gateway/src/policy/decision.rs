//! The outcome of evaluating policy for one use of a tool, prompt or resource: which effect
//! and which rule (or the default) decided it.
//!
//! Invariant: a decision always names its origin — a rule by its configured (unique) name, or
//! the default — so a denial can be explained to the caller and recorded in the audit trail
//! without the arguments that led to it.

use std::fmt;
use std::sync::Arc;

use serde::Serialize;

use super::rule::Effect;

/// What policy decided for one use, and why. Serializes as
/// `{"effect": "deny", "rule": "no-deletes"}` (`rule` is `null` when the default decided).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    effect: Effect,
    rule: Option<Arc<str>>,
}

impl Decision {
    /// Decided by the rule named `rule` (the first rule whose `when` held).
    pub fn by_rule(effect: Effect, rule: Arc<str>) -> Self {
        Self { effect, rule: Some(rule) }
    }

    /// Decided by `policy.default` (no rule matched, or there are no rules).
    pub fn by_default(effect: Effect) -> Self {
        Self { effect, rule: None }
    }

    /// The effect.
    pub fn effect(&self) -> Effect {
        self.effect
    }

    /// Whether the use may go ahead.
    pub fn is_allowed(&self) -> bool {
        self.effect == Effect::Allow
    }

    /// The deciding rule's name; `None` when the default decided.
    pub fn rule(&self) -> Option<&str> {
        self.rule.as_deref()
    }
}

/// `allowed by rule "x"`, `denied by default`: for log lines.
impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = match self.effect {
            Effect::Allow => "allowed",
            Effect::Deny => "denied",
        };
        match &self.rule {
            Some(rule) => write!(f, "{verb} by rule {rule:?}"),
            None => write!(f, "{verb} by default"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Decision, Effect};

    #[test]
    fn a_decision_names_its_origin_in_logs_and_events() {
        let denied = Decision::by_rule(Effect::Deny, "no-deletes".into());
        assert_eq!(denied.to_string(), r#"denied by rule "no-deletes""#);
        assert_eq!(serde_json::to_value(&denied).unwrap(), serde_json::json!({"effect": "deny", "rule": "no-deletes"}));
        let allowed = Decision::by_default(Effect::Allow);
        assert!(allowed.is_allowed());
        assert_eq!(allowed.to_string(), "allowed by default");
        assert_eq!(serde_json::to_value(&allowed).unwrap(), serde_json::json!({"effect": "allow", "rule": null}));
    }
}
