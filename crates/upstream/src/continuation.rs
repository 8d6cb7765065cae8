//! What the next round of an upstream call needs to go on, handed out with an
//! `input_required` round (sealed by the gateway into its `requestState`, or kept in a task's
//! record) or recorded as a task's checkpoint: either the upstream's own multi-round state, or
//! the upstream task the call tracks, or the connect link its caller was asked to open.
//!
//! Invariant: a continuation names its upstream, and one naming another upstream is refused,
//! so state handed out for one upstream's call never reaches another upstream.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpgate_runtime::catalog::{Failure, ToolCall};

/// The continuation of one upstream call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub(crate) enum Continuation {
    /// The upstream answered `input_required` (a 2026-07-28 multi-round call).
    #[serde(rename_all = "camelCase")]
    Round {
        /// The upstream that asked.
        upstream: String,
        /// The keys it asked this round (only their answers go back).
        keys: Vec<String>,
        /// Its `requestState`, if it sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        state: Option<String>,
        /// The number of this input round in the call (see [`exposed_key`]).
        #[serde(default)]
        round: u32,
    },
    /// The call tracks a task the upstream created.
    #[serde(rename_all = "camelCase")]
    Task {
        /// The upstream holding the task.
        upstream: String,
        /// The upstream's task id.
        task_id: String,
        /// Whether it is a 2025-11-25 task (`tasks/result` holds its result).
        legacy: bool,
        /// The input keys the upstream task asked and the client is answering (empty when
        /// resuming after a checkpoint).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        keys: Vec<String>,
        /// The number of the call's last input round (see [`exposed_key`]).
        #[serde(default)]
        round: u32,
    },
    /// The call asked its caller to connect their account at an `auth = "oauth"` upstream.
    #[serde(rename_all = "camelCase")]
    Connect {
        /// The upstream to connect.
        upstream: String,
        /// The key of the URL elicitation asked (its answer says whether the user declined).
        key: String,
    },
}

/// The key the client sees for the upstream's `key` in input round `round`: the upstream's own
/// in the first round, made unique in later ones, since a client (and a gateway task) must never
/// see a key twice while an upstream may reuse one (asking again after a lost answer, or in
/// another round).
pub(crate) fn exposed_key(key: &str, round: u32) -> String {
    if round <= 1 { key.to_owned() } else { format!("{key}.r{round}") }
}

impl Continuation {
    /// The continuation a call resumes from, if any: `Err` when its state is not an upstream
    /// continuation of `upstream` (tampering is caught by the seal before; this is a state of
    /// another tool or upstream).
    pub(crate) fn of(call: &ToolCall, upstream: &str) -> Result<Option<Self>, Failure> {
        let Some(state) = &call.state else { return Ok(None) };
        let continuation: Self = serde_json::from_value(state.clone())
            .map_err(|_| Failure::InvalidParams("requestState does not belong to this upstream call".to_owned()))?;
        let named = match &continuation {
            Self::Round { upstream, .. } | Self::Task { upstream, .. } | Self::Connect { upstream, .. } => upstream,
        };
        if named != upstream {
            return Err(Failure::InvalidParams("requestState does not belong to this upstream call".to_owned()));
        }
        Ok(Some(continuation))
    }

    /// The number of the call's last input round.
    pub(crate) fn round(&self) -> u32 {
        match self {
            Self::Round { round, .. } | Self::Task { round, .. } => *round,
            Self::Connect { .. } => 0,
        }
    }

    /// As the state handed to the gateway.
    pub(crate) fn to_state(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(state: Value) -> ToolCall {
        ToolCall { arguments: json!({}), input_responses: Default::default(), state: Some(state) }
    }

    #[test]
    fn a_continuation_is_bound_to_its_upstream() {
        let task = Continuation::Task {
            upstream: "a".to_owned(),
            task_id: "t1".to_owned(),
            legacy: false,
            keys: vec![],
            round: 0,
        };
        assert_eq!(Continuation::of(&call(task.to_state()), "a").expect("ours"), Some(task.clone()));
        assert!(Continuation::of(&call(task.to_state()), "b").is_err());
        assert!(Continuation::of(&call(json!({"round": 1})), "a").is_err(), "a built-in tool's state");
        let none = ToolCall { arguments: json!({}), input_responses: Default::default(), state: None };
        assert_eq!(Continuation::of(&none, "a").expect("fresh"), None);
    }
}
