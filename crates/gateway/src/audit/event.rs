//! One audit line: its fields, their stable names (documented in docs/audit.md), and how it is
//! serialized within a bounded size.
//!
//! Invariants: every line has every field (null when it does not apply), so consumers can rely
//! on the schema; no result ever goes in, and arguments only when the operator asked for them;
//! a line is at most [`MAX_LINE_BYTES`] long: client-chosen strings are clipped and arguments
//! that would not fit are left out (`arguments_truncated: true`).

use serde::Serialize;
use serde_json::Value;

/// The longest audit line written (newline included).
pub const MAX_LINE_BYTES: usize = 16 * 1024;

/// Longest client-chosen string (a name, a subject) kept whole in a line.
const MAX_FIELD_BYTES: usize = 512;

/// The caller, as the line names it.
#[derive(Debug, Serialize)]
pub(super) struct PrincipalField<'a> {
    /// Token issuer.
    pub(super) iss: &'a str,
    /// Token subject.
    pub(super) sub: &'a str,
}

/// One audit event.
#[derive(Debug, Serialize)]
pub(super) struct AuditEvent<'a> {
    /// RFC 3339 UTC with milliseconds.
    pub(super) time: String,
    /// `tools/call`, `prompts/get`, `resources/read`, or `task.<transition>`.
    pub(super) event: &'a str,
    /// Who made the request, or created the task.
    pub(super) principal: PrincipalField<'a>,
    /// The (virtual) server the request came through; "" for the root endpoint.
    pub(super) server: &'a str,
    /// The upstream serving the tool, prompt or resource; null for the gateway's own.
    pub(super) upstream: Option<&'a str>,
    /// The tool or prompt name, or the resource URI.
    pub(super) name: &'a str,
    /// `modern` (2026-07-28) or `legacy` (2025-11-25 and older); null when unknown.
    pub(super) era: Option<&'static str>,
    /// How it ended (see docs/audit.md for the values).
    pub(super) outcome: &'static str,
    /// The JSON-RPC error code when `outcome` is `error`.
    pub(super) error_code: Option<i64>,
    /// How long the request took, or the task has lived (terminal transitions).
    pub(super) duration_ms: Option<u64>,
    /// The task created by or transitioning in this event.
    pub(super) task_id: Option<&'a str>,
    /// The policy decision of a request; null on task transitions.
    pub(super) policy: Option<&'static str>,
    /// The rule that denied a request; null when allowed, denied by default, or a transition.
    pub(super) policy_rule: Option<&'a str>,
    /// The replica that wrote the line.
    pub(super) replica: &'a str,
    /// The call's arguments (`audit.include_arguments` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arguments: Option<&'a Value>,
    /// Set when the arguments were left out to keep the line bounded.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(super) arguments_truncated: bool,
}

impl AuditEvent<'_> {
    /// The line (newline included), at most [`MAX_LINE_BYTES`] long.
    pub(super) fn clipped_line(&mut self) -> Vec<u8> {
        self.principal.iss = clip(self.principal.iss);
        self.principal.sub = clip(self.principal.sub);
        self.name = clip(self.name);
        self.upstream = self.upstream.map(clip);
        self.task_id = self.task_id.map(clip);
        let mut line = serde_json::to_vec(&*self).unwrap_or_default();
        if line.len() >= MAX_LINE_BYTES && self.arguments.is_some() {
            self.arguments = None;
            self.arguments_truncated = true;
            line = serde_json::to_vec(&*self).unwrap_or_default();
        }
        line.push(b'\n');
        line
    }
}

/// `text`, cut at a character boundary to at most [`MAX_FIELD_BYTES`].
fn clip(text: &str) -> &str {
    if text.len() <= MAX_FIELD_BYTES {
        return text;
    }
    let mut end = MAX_FIELD_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event<'a>(name: &'a str, arguments: Option<&'a Value>) -> AuditEvent<'a> {
        AuditEvent {
            time: crate::time::iso8601(0),
            event: "tools/call",
            principal: PrincipalField { iss: "https://issuer", sub: "alice" },
            server: "",
            upstream: None,
            name,
            era: Some("modern"),
            outcome: "ok",
            error_code: None,
            duration_ms: Some(3),
            task_id: None,
            policy: Some("allowed"),
            policy_rule: None,
            replica: "r1",
            arguments,
            arguments_truncated: false,
        }
    }

    #[test]
    fn every_field_is_present_and_arguments_only_when_given() {
        let line = event("echo", None).clipped_line();
        let value: Value = serde_json::from_slice(&line).expect("json");
        for field in [
            "time",
            "event",
            "principal",
            "server",
            "upstream",
            "name",
            "era",
            "outcome",
            "error_code",
            "duration_ms",
            "task_id",
            "policy",
            "policy_rule",
            "replica",
        ] {
            assert!(value.get(field).is_some(), "{field} missing from {value}");
        }
        assert!(value.get("arguments").is_none(), "{value}");
        assert_eq!(value["time"], "1970-01-01T00:00:00.000Z");
        assert_eq!(line.last(), Some(&b'\n'));
    }

    #[test]
    fn lines_stay_bounded() {
        let name = "é".repeat(MAX_LINE_BYTES);
        let big = serde_json::json!({ "blob": "x".repeat(MAX_LINE_BYTES * 2) });
        let line = event(&name, Some(&big)).clipped_line();
        assert!(line.len() <= MAX_LINE_BYTES, "{} bytes", line.len());
        let value: Value = serde_json::from_slice(&line).expect("json");
        assert_eq!(value["arguments_truncated"], true);
        assert!(value.get("arguments").is_none());
        assert!(value["name"].as_str().is_some_and(|n| n.len() <= MAX_FIELD_BYTES));
        let small = serde_json::json!({ "text": "hi" });
        let value: Value = serde_json::from_slice(&event("echo", Some(&small)).clipped_line()).expect("json");
        assert_eq!(value["arguments"], small);
    }
}
