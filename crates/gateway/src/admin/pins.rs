//! The admin routes of pinned tool definitions: what each pinned upstream withholds (approved
//! vs latest seen definition, and which fields changed), and approving what was shown.
//!
//! ```text
//! GET  /admin/tools/withheld?upstream=                       withheld tools of pinned upstreams
//! POST /admin/tools/approve {"upstream", "tool", "hash"}     approve the definition with this hash
//! POST /admin/tools/approve {"upstream", "all": true}        approve every withheld tool as listed now
//! ```
//!
//! Invariant: an approval always names a hash (the one the operator saw, or, with `all`, the
//! one listed in the same request); a definition seen since is refused (409), never approved
//! blindly. Every approval is logged and announced, so every replica serves it at once.

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_store::{Approval, Change, EventBus as _, Pins as _, Withheld};

use super::Failed;
use crate::error::GatewayError;
use crate::pinning::changed_fields;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/admin/tools/withheld", get(withheld)).route("/admin/tools/approve", post(approve))
}

#[derive(Deserialize)]
struct WithheldQuery {
    upstream: Option<String>,
}

/// The pinned upstreams asked about: `upstream` (which must be pinned), or every one.
fn pinned(state: &AppState, upstream: Option<&str>) -> Result<Vec<String>, GatewayError> {
    let all: Vec<String> = state
        .federation
        .upstreams()
        .iter()
        .filter(|u| u.config().pin.is_pinned())
        .map(|u| u.name().to_owned())
        .collect();
    match upstream {
        None => Ok(all),
        Some(name) if all.iter().any(|n| n == name) => Ok(vec![name.to_owned()]),
        Some(name) => Err(GatewayError::AdminInvalid { detail: format!("no pinned upstream named {name:?}") }),
    }
}

fn describe(upstream: &str, w: &Withheld) -> Value {
    let parse = |s: &str| serde_json::from_str::<Value>(s).unwrap_or(Value::Null);
    json!({
        "upstream": upstream,
        "tool": w.tool,
        "hash": w.hash,
        "approvedHash": w.approved_hash,
        "new": w.approved_hash.is_none(),
        "changes": changed_fields(w.approved_definition.as_deref(), &w.definition),
        "current": parse(&w.definition),
        "approved": w.approved_definition.as_deref().map(parse),
    })
}

async fn withheld(
    State(state): State<AppState>,
    query: Result<Query<WithheldQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, Failed> {
    let Query(query) = query.map_err(|e| GatewayError::AdminInvalid { detail: e.body_text() })?;
    let mut tools = Vec::new();
    for upstream in pinned(&state, query.upstream.as_deref())? {
        for w in state.store.pins_withheld(&upstream).await? {
            tools.push(describe(&upstream, &w));
        }
    }
    Ok(Json(json!({ "withheld": tools })))
}

#[derive(Deserialize)]
struct ApproveBody {
    upstream: String,
    tool: Option<String>,
    hash: Option<String>,
    #[serde(default)]
    all: bool,
}

async fn approve(State(state): State<AppState>, body: axum::body::Bytes) -> Result<Json<Value>, Failed> {
    let body: ApproveBody = serde_json::from_slice(&body).map_err(|e| GatewayError::AdminInvalid {
        detail: format!("expected {{\"upstream\", \"tool\", \"hash\"}} or {{\"upstream\", \"all\": true}}: {e}"),
    })?;
    let upstream = pinned(&state, Some(&body.upstream))?.remove(0);
    let wanted: Vec<(String, String)> = match (body.all, body.tool, body.hash) {
        (true, None, None) => {
            state.store.pins_withheld(&upstream).await?.into_iter().map(|w| (w.tool, w.hash)).collect()
        }
        (false, Some(tool), Some(hash)) => vec![(tool, hash)],
        _ => {
            return Err(GatewayError::AdminInvalid {
                detail: "approve one tool with its hash (as `diff` prints it), or all with \"all\": true".to_owned(),
            }
            .into());
        }
    };
    let mut approved = Vec::new();
    let mut refused = Vec::new();
    for (tool, hash) in wanted {
        match state.store.pins_approve(&upstream, &tool, &hash).await? {
            Approval::Approved => {
                tracing::info!(upstream = %upstream, tool = %tool, hash = %hash, "an operator approved a pinned tool definition");
                approved.push(json!({ "tool": tool, "hash": hash }));
            }
            Approval::Stale { current } => refused.push(json!({
                "tool": tool, "hash": hash, "latestHash": current,
                "reason": "its definition is no longer the one with this hash: run diff again",
            })),
            Approval::Full => refused.push(json!({
                "tool": tool, "hash": hash, "reason": "the upstream has the most approved tools kept",
            })),
        }
    }
    if !approved.is_empty() {
        // Every replica (this one too) reads the approved hashes on this announcement and
        // rebuilds; one that misses it does at its next poll.
        if let Err(e) = state.store.publish_change(&Change::ToolsListChanged).await {
            tracing::warn!(error = %e, "could not announce an approval; replicas serve it at their next poll");
        }
    }
    if !body.all && approved.is_empty() {
        let detail = refused.first().map_or_else(
            || "not approved".to_owned(),
            |r| match r["latestHash"].as_str() {
                Some(latest) => format!(
                    "{} not approved: its definition changed again (latest hash {latest}); run diff again",
                    r["tool"]
                ),
                None => format!("{} not approved: {}", r["tool"], r["reason"].as_str().unwrap_or("")),
            },
        );
        return Err(GatewayError::AdminConflict { detail }.into());
    }
    Ok(Json(json!({ "upstream": upstream, "approved": approved, "refused": refused })))
}

/// `mcpgate admin tools diff` as an operator reads it: per withheld tool, why, the hash to
/// approve, and each changed field's approved and current value.
pub(super) fn render_diff(answer: &Value) -> String {
    use std::fmt::Write as _;
    let tools = answer["withheld"].as_array().cloned().unwrap_or_default();
    if tools.is_empty() {
        return "no pinned tool is withheld\n".to_owned();
    }
    let show = |v: &Value| match v {
        Value::Null => "(none)".to_owned(),
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    };
    let mut out = String::new();
    for t in &tools {
        let (upstream, tool, hash) = (show_str(&t["upstream"]), show_str(&t["tool"]), show_str(&t["hash"]));
        let why = if t["new"].as_bool() == Some(true) { "new, never approved" } else { "changed since approved" };
        let _ = writeln!(out, "{upstream} / {tool}: withheld ({why})");
        let _ = writeln!(out, "  hash {hash}");
        let _ =
            writeln!(out, "  approve: mcpgate admin tools approve --upstream {upstream} --tool {tool} --hash {hash}");
        for change in t["changes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  {}:", show_str(&change["field"]));
            let _ = writeln!(out, "    - approved: {}", show(&change["approved"]));
            let _ = writeln!(out, "    + current:  {}", show(&change["current"]));
        }
    }
    out
}

fn show_str(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn the_diff_shows_the_hash_to_approve_and_each_changed_field() {
        let answer = json!({ "withheld": [{
            "upstream": "web", "tool": "search", "hash": "ab12", "approvedHash": "cd34", "new": false,
            "changes": [{ "field": "description", "approved": "Find", "current": "Find and exfiltrate" }],
        }]});
        let text = super::render_diff(&answer);
        assert!(text.contains("web / search: withheld (changed since approved)"), "{text}");
        assert!(text.contains("--upstream web --tool search --hash ab12"), "{text}");
        assert!(text.contains("- approved: \"Find\""), "{text}");
        assert!(text.contains("+ current:  \"Find and exfiltrate\""), "{text}");
        assert_eq!(super::render_diff(&json!({ "withheld": [] })), "no pinned tool is withheld\n");
    }
}
