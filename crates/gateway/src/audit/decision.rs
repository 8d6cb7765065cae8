//! The policy decision an audit line records for a request: what `[[policy]]` said (see
//! `crate::policy`). A request that reached its handler was allowed unless it ended denied
//! (shown, or hidden as "not found" by `policy_hide_denied`); a denial names its rule (none:
//! `policy_default` decided).

use crate::error::GatewayError;

/// What the policy said about a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyDecision {
    /// Allowed (no rule denied it).
    Allowed,
    /// Denied by the named rule (`None`: by `policy_default`).
    Denied {
        /// The deciding rule.
        rule: Option<String>,
    },
}

impl PolicyDecision {
    /// The decision a request that ended with `error` was given.
    pub(crate) fn of_error(error: &GatewayError) -> Option<Self> {
        match error {
            // A hidden denial reads as "not found" to the caller, never to the trail.
            GatewayError::PolicyDenied { rule, .. } | GatewayError::PolicyHidden { rule, .. } => {
                Some(Self::Denied { rule: rule.clone() })
            }
            _ => None,
        }
    }

    /// The stable text of the `policy` field.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
            Self::Denied { .. } => "denied",
        }
    }

    /// The `policy_rule` field: the rule that denied (null when allowed or denied by default).
    pub fn rule(&self) -> Option<&str> {
        match self {
            Self::Allowed => None,
            Self::Denied { rule } => rule.as_deref(),
        }
    }
}
