//! The policy decision an audit line records for a request.
//!
//! Stand-in until the policy engine's `crate::policy::Decision` is merged: every request that
//! reaches a tool, prompt or resource today is allowed. The one place a request's decision is
//! handed to the trail is `RequestAudit::decided` (called from `mcp::dispatch`); swap this
//! enum for the engine's type there and here.

use serde::Serialize;

/// What the policy said about a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyDecision {
    /// Allowed (no policy configured, or a rule or the default allowed it).
    Allowed,
}

impl PolicyDecision {
    /// The stable text of the `policy` field.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Allowed => "allowed",
        }
    }
}
