//! The admin routes of pinned tool definitions: what each pinned upstream withholds (approved
//! vs latest seen definition, and which fields changed), and approving exactly what was shown.
//!
//! ```text
//! GET  /admin/tools/withheld?upstream=                                   withheld tools of pinned upstreams
//! POST /admin/tools/approve {"upstream", "tools": [{"tool", "hash"}]}     approve these definitions
//! POST /admin/tools/approve {"upstream", "tool", "hash"}                  the same, for one tool
//! ```
//!
//! Invariant: an approval always names each tool's hash, the one the operator was shown;
//! there is no form that approves "whatever is withheld now". Each pair is compare-and-set on
//! its own: a pair whose hash is still the latest seen is approved (it is exactly what was
//! shown), the others are refused, and then the answer is 409 naming them (and the ones
//! approved). Every approval is logged and announced, so every replica serves it at once.
//! Upstream-supplied text in the readable diff is escaped (no control characters reach the
//! operator's terminal) and the suggested command quotes what a shell would interpret.

use axum::extract::{Query, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_store::{Approval, Change, EventBus as _, Pins as _, Withheld};

use super::Failed;
use crate::error::GatewayError;
use crate::pinning::{changed_fields, duplicate_note, follows_the_name_rules, omitted, printable, shell_word};
use crate::state::AppState;

/// Most pairs one approval names (the most tools an upstream has withheld).
const MAX_PAIRS: usize = mcpgate_store::MAX_PINNED_TOOLS;

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
    // A definition too large to show, or a name listed more than once, is a stub: nothing to
    // compare, and nothing to approve.
    let too_large = omitted(&w.definition).filter(|_| w.hash.is_empty());
    let duplicate = duplicate_note(&w.definition).filter(|_| w.hash.is_empty());
    let changes = if too_large.is_some() || duplicate.is_some() {
        Vec::new()
    } else {
        changed_fields(w.approved_definition.as_deref(), &w.definition)
    };
    json!({
        "upstream": upstream,
        "tool": w.tool,
        "hash": w.hash,
        "approvable": !w.hash.is_empty(),
        "tooLarge": too_large,
        "duplicate": duplicate,
        "approvedHash": w.approved_hash,
        "new": w.approved_hash.is_none(),
        "changes": changes,
        "current": parse(&w.definition),
        "approved": w.approved_definition.as_deref().map(parse),
    })
}

async fn withheld(
    State(state): State<AppState>,
    query: Result<Query<WithheldQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, Failed> {
    // Text by design: the admin client is answered with the rejection as it is.
    let Query(query) = query.map_err(|e| GatewayError::AdminInvalid { detail: e.body_text() })?;
    let mut tools = Vec::new();
    for upstream in pinned(&state, query.upstream.as_deref())? {
        for w in state.store.pins_withheld(&upstream).await? {
            tools.push(describe(&upstream, &w));
        }
    }
    Ok(Json(json!({ "withheld": tools })))
}

/// One definition an operator approves: the tool and the hash it was shown with.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Pair {
    tool: String,
    hash: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApproveBody {
    upstream: String,
    #[serde(default)]
    tools: Option<Vec<Pair>>,
    tool: Option<String>,
    hash: Option<String>,
}

/// Whether `hash` is a SHA-256 as `diff` shows it (64 lowercase hex digits).
fn is_hash(hash: &str) -> bool {
    hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The pairs an approval names, checked (never "whatever is withheld now").
fn pairs(body: ApproveBody) -> Result<Vec<Pair>, GatewayError> {
    const SHAPE: &str = "approve {\"upstream\", \"tools\": [{\"tool\", \"hash\"}, ...]} or {\"upstream\", \"tool\", \"hash\"}, \
                         each hash as `diff` shows it";
    let pairs = match (body.tools, body.tool, body.hash) {
        (Some(pairs), None, None) if !pairs.is_empty() => pairs,
        (None, Some(tool), Some(hash)) => vec![Pair { tool, hash }],
        _ => return Err(GatewayError::AdminInvalid { detail: SHAPE.to_owned() }),
    };
    if pairs.len() > MAX_PAIRS {
        return Err(GatewayError::AdminInvalid { detail: format!("at most {MAX_PAIRS} tools per approval") });
    }
    if let Some(bad) = pairs.iter().find(|p| !follows_the_name_rules(&p.tool) || !is_hash(&p.hash)) {
        return Err(GatewayError::AdminInvalid {
            detail: format!(
                "{}: a tool name (1-128 of A-Z a-z 0-9 _ - .) and a 64-hex-digit hash are needed; {SHAPE}",
                printable(&format!("{:?} {:?}", bad.tool, bad.hash))
            ),
        });
    }
    Ok(pairs)
}

async fn approve(State(state): State<AppState>, body: axum::body::Bytes) -> Result<Json<Value>, Failed> {
    // Text by design: the admin client is told what in its body does not decode.
    let body: ApproveBody = serde_json::from_slice(&body).map_err(|e| GatewayError::AdminInvalid {
        detail: format!("expected {{\"upstream\", \"tools\": [{{\"tool\", \"hash\"}}]}}: {e}"),
    })?;
    let upstream = pinned(&state, Some(&body.upstream))?.remove(0);
    let mut approved = Vec::new();
    let mut refused: Vec<String> = Vec::new();
    for Pair { tool, hash } in pairs(body)? {
        match state.store.pins_approve(&upstream, &tool, &hash).await? {
            Approval::Approved => {
                tracing::info!(upstream = %upstream, tool = %tool, hash = %hash, "an operator approved a pinned tool definition");
                approved.push(json!({ "tool": tool, "hash": hash }));
            }
            Approval::Stale { current: Some(latest) } => {
                refused.push(format!("{tool} (its definition changed since shown; latest hash {latest})"));
            }
            Approval::Stale { current: None } => refused.push(format!("{tool} (no longer withheld with that hash)")),
            Approval::Full => refused.push(format!("{tool} (the upstream has the most approved tools kept)")),
        }
    }
    if !approved.is_empty() {
        // Every replica (this one too) reads the approved hashes on this announcement and
        // rebuilds; one that misses it does at its next poll.
        if let Err(e) = state.store.publish_change(&Change::ToolsListChanged).await {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "could not announce an approval; replicas serve it at their next poll"
            );
        }
    }
    if !refused.is_empty() {
        let done: Vec<&str> = approved.iter().filter_map(|a| a["tool"].as_str()).collect();
        let detail = format!(
            "not approved: {}; run diff again{}",
            refused.join(", "),
            if done.is_empty() { String::new() } else { format!(" (approved as shown: {})", done.join(", ")) }
        );
        return Err(GatewayError::AdminConflict { detail }.into());
    }
    Ok(Json(json!({ "upstream": upstream, "approved": approved })))
}

/// `mcpgate admin tools diff` as an operator reads it: per withheld tool, why, the hash to
/// approve, and each changed field's approved and current value. Every string from the answer
/// is printed escaped (an upstream's text never drives the terminal), and the suggested
/// command quotes any word a shell would interpret.
pub(super) fn render_diff(answer: &Value) -> String {
    use std::fmt::Write as _;
    let tools = answer["withheld"].as_array().cloned().unwrap_or_default();
    if tools.is_empty() {
        return "no pinned tool is withheld\n".to_owned();
    }
    let show = |v: &Value| match v {
        Value::Null => "(none)".to_owned(),
        Value::String(s) => format!("{s:?}"),
        other => printable(&other.to_string()),
    };
    let mut out = String::new();
    for t in &tools {
        let (upstream, tool, hash) = (text(&t["upstream"]), text(&t["tool"]), text(&t["hash"]));
        let duplicate = t["duplicate"].as_str();
        let why = match (duplicate, t["new"].as_bool() == Some(true)) {
            (Some(_), _) => "duplicate: the upstream lists this name more than once",
            (None, true) => "new, never approved",
            (None, false) => "changed since approved",
        };
        let _ = writeln!(out, "{} / {}: withheld ({why})", printable(upstream), printable(tool));
        if let Some(note) = duplicate {
            let _ = writeln!(out, "  {}; cannot be approved (the upstream must list it once)", printable(note));
            continue;
        }
        if hash.is_empty() {
            let size = printable(t["tooLarge"].as_str().unwrap_or("no hash"));
            let _ = writeln!(out, "  {size}: not kept, cannot be approved (the upstream must shrink it)");
            continue;
        }
        let _ = writeln!(out, "  hash {}", printable(hash));
        let _ = writeln!(
            out,
            "  approve: mcpgate admin tools approve --upstream {} --tool {} --hash {}",
            shell_word(upstream),
            shell_word(tool),
            shell_word(hash)
        );
        for change in t["changes"].as_array().into_iter().flatten() {
            let _ = writeln!(out, "  {}:", printable(text(&change["field"])));
            let _ = writeln!(out, "    - approved: {}", show(&change["approved"]));
            let _ = writeln!(out, "    + current:  {}", show(&change["current"]));
        }
    }
    out
}

/// The (tool, hash) pairs of a `withheld` answer that can be approved: exactly what `diff`
/// showed, for `approve --all` to send.
pub(super) fn approvable_pairs(answer: &Value) -> Vec<Value> {
    answer["withheld"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| !text(&t["hash"]).is_empty())
        .map(|t| json!({ "tool": t["tool"], "hash": t["hash"] }))
        .collect()
}

fn text(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
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

    #[test]
    fn a_duplicated_name_is_shown_as_a_duplicate_with_nothing_to_approve() {
        let store = super::Withheld {
            tool: "search".to_owned(),
            hash: String::new(),
            definition: r#"{"_duplicate":"listed 2 times (definitions aa, bb): no copy is served"}"#.to_owned(),
            approved_hash: Some("bb".to_owned()),
            approved_definition: Some(r#"{"description":"Search"}"#.to_owned()),
        };
        let described = super::describe("web", &store);
        assert_eq!(described["approvable"], false, "{described}");
        assert_eq!(described["changes"], json!([]), "{described}");
        assert!(described["duplicate"].as_str().is_some_and(|n| n.starts_with("listed 2 times")), "{described}");
        let answer = json!({ "withheld": [described] });
        let text = super::render_diff(&answer);
        assert!(text.contains("web / search: withheld (duplicate: the upstream lists this name more than once)"));
        assert!(text.contains("listed 2 times (definitions aa, bb)") && !text.contains("approve:"), "{text}");
        assert!(super::approvable_pairs(&answer).is_empty(), "nothing of a duplicate is ever sent for approval");
    }

    #[test]
    fn upstream_text_in_the_diff_is_escaped_and_the_command_quoted() {
        let answer = json!({ "withheld": [{
            "upstream": "web", "tool": "x; rm -rf ~", "hash": "ab12", "new": true,
            "changes": [{ "field": "description", "approved": null,
                          "current": "Find\u{1b}[2K\u{1b}[1A" },
                        { "field": "inputSchema", "approved": null,
                          "current": { "\u{9b}2Kq": { "description": "\u{202e}evil" } } }],
        }, {
            "upstream": "web", "tool": "huge", "hash": "", "new": true, "tooLarge": "definition too large (99999 bytes)",
            "changes": [],
        }]});
        let text = super::render_diff(&answer);
        assert!(!text.chars().any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'), "{text:?}");
        assert!(text.contains("--tool 'x; rm -rf ~' --hash ab12"), "{text}");
        assert!(text.contains(r#"+ current:  "Find\u{1b}[2K\u{1b}[1A""#), "{text}");
        assert!(text.contains("definition too large (99999 bytes): not kept, cannot be approved"), "{text}");
        let pairs = super::approvable_pairs(&answer);
        assert_eq!(pairs, [json!({ "tool": "x; rm -rf ~", "hash": "ab12" })], "a stub is never sent");
    }

    #[test]
    fn an_approval_names_every_hash_and_there_is_no_approve_all() {
        let parse = |body: serde_json::Value| {
            serde_json::from_value::<super::ApproveBody>(body).map_err(|e| e.to_string()).and_then(|b| {
                super::pairs(b)
                    .map(|p| p.into_iter().map(|p| (p.tool, p.hash)).collect::<Vec<_>>())
                    .map_err(|e| e.to_string())
            })
        };
        let hash = "a".repeat(64);
        assert_eq!(
            parse(json!({ "upstream": "web", "tools": [{ "tool": "search", "hash": hash }] })),
            Ok(vec![("search".to_owned(), hash.clone())])
        );
        assert_eq!(parse(json!({ "upstream": "web", "tool": "search", "hash": hash })).map(|p| p.len()), Ok(1));
        for refused in [
            json!({ "upstream": "web", "all": true }),
            json!({ "upstream": "web", "tools": [] }),
            json!({ "upstream": "web", "tools": [{ "tool": "search" }] }),
            json!({ "upstream": "web", "tools": [{ "tool": "search", "hash": "" }] }),
            json!({ "upstream": "web", "tools": [{ "tool": "$(id)", "hash": hash }] }),
        ] {
            assert!(parse(refused.clone()).is_err(), "{refused}");
        }
    }
}
