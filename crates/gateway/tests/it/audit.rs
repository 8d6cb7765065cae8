//! The audit trail, read back from its file sink: one line per tools/call, prompts/get and
//! resources/read (both eras, answered at once or streamed), one per task transition, with
//! the documented fields, and never the arguments unless `audit.include_arguments` is set.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::Router;
use mcpgate_store::testing::wait::{Look, wait_for};
use serde_json::{Value, json};

use crate::support::{Req, app, claims, config, hs, hs256_config, initialize};

const EXT: &str = "io.modelcontextprotocol/tasks";
/// An argument value that must never reach the trail unless asked for.
const SECRET_ARG: &str = "do-not-log-7f3a";

/// `base` writing its trail to a file in a fresh directory (kept alive by the returned guard).
fn audited(mut base: mcpgate::Config, include_arguments: bool) -> (mcpgate::Config, tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("audit.jsonl");
    base.audit = mcpgate::config::AuditConfig {
        enabled: true,
        sink: mcpgate::config::AuditSink::File,
        path: Some(path.to_string_lossy().into_owned()),
        include_arguments,
    };
    (base, dir, path)
}

fn read_lines(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"))).collect()
}

/// Waits (at most 10 s) until the trail holds a line that `wanted` accepts; returns it.
async fn line_where(path: &Path, what: &str, wanted: impl Fn(&Value) -> bool) -> Value {
    wait_for(format_args!("an audit line for {what}"), Duration::from_secs(10), async || {
        let lines = read_lines(path);
        let line = lines.iter().find(|l| wanted(l)).cloned();
        line.map_or_else(|| Look::NotYet(format!("trail: {lines:#?}")), Look::Done)
    })
    .await
}

fn event_named<'a>(event: &'a str, name: &'a str) -> impl Fn(&Value) -> bool + 'a {
    move |l| l["event"] == event && l["name"] == name
}

fn bearer(sub: &str) -> String {
    format!("Bearer {}", hs(&claims(sub)))
}

#[tokio::test]
async fn calls_are_audited_with_their_outcome_and_without_arguments() {
    let (config, _dir, path) = audited(hs256_config(), false);
    let app = app(config).await;
    let call = |name: &str, args: Value| {
        Req::modern("tools/call", json!({"name": name, "arguments": args})).header("authorization", &bearer("alice"))
    };
    assert_eq!(call("echo", json!({"text": SECRET_ARG})).send(&app).await.result()["content"][0]["text"], SECRET_ARG);
    assert_eq!(call("fail", json!({})).send(&app).await.result()["isError"], true);
    let unknown = call("no_such_tool", json!({"text": SECRET_ARG})).send(&app).await;
    assert_eq!(unknown.json()["error"]["code"], -32602);

    let ok = line_where(&path, "echo", event_named("tools/call", "echo")).await;
    assert_eq!(ok["outcome"], "ok", "{ok}");
    assert_eq!(ok["principal"], json!({"iss": crate::support::ISS, "sub": "alice"}));
    assert_eq!(
        (ok["era"].as_str(), ok["server"].as_str(), ok["policy"].as_str()),
        (Some("modern"), Some(""), Some("allowed"))
    );
    assert!(ok["upstream"].is_null() && ok["task_id"].is_null() && ok["error_code"].is_null(), "{ok}");
    assert!(ok["duration_ms"].is_u64() && ok["replica"].as_str().is_some_and(|r| !r.is_empty()), "{ok}");
    let time = ok["time"].as_str().expect("time");
    assert!(time.len() == 24 && time.ends_with('Z') && time.as_bytes()[19] == b'.', "RFC 3339 UTC with ms: {time}");
    assert!(ok.get("arguments").is_none(), "{ok}");

    let failed = line_where(&path, "fail", event_named("tools/call", "fail")).await;
    assert_eq!(failed["outcome"], "tool_error", "{failed}");
    let refused = line_where(&path, "the unknown tool", event_named("tools/call", "no_such_tool")).await;
    assert_eq!((refused["outcome"].as_str(), refused["error_code"].as_i64()), (Some("error"), Some(-32602)));

    let prompt = Req::modern("prompts/get", json!({"name": "summarize", "arguments": {"text": SECRET_ARG}}))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await;
    prompt.result();
    let read = Req::modern("resources/read", json!({"uri": "mcpgate://demo/readme"}))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await;
    read.result();
    assert_eq!(line_where(&path, "the prompt", event_named("prompts/get", "summarize")).await["outcome"], "ok");
    assert_eq!(
        line_where(&path, "the resource", event_named("resources/read", "mcpgate://demo/readme")).await["outcome"],
        "ok"
    );
    let missing = Req::modern("resources/read", json!({"uri": "mcpgate://demo/none"}))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await;
    assert!(missing.json().get("error").is_some(), "{:?}", missing.json());
    let refused = line_where(&path, "the missing resource", event_named("resources/read", "mcpgate://demo/none")).await;
    assert_eq!(refused["outcome"], "error", "{refused}");
    let text = std::fs::read_to_string(&path).expect("trail");
    assert!(!text.contains(SECRET_ARG), "an argument reached the trail:\n{text}");
    assert!(!text.contains("Echo:") && !text.contains("mcpgate demo"), "a result reached the trail:\n{text}");
}

#[tokio::test]
async fn arguments_are_in_the_trail_only_when_asked_for() {
    let (config, _dir, path) = audited(config(), true);
    let app = app(config).await;
    Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": SECRET_ARG}})).send(&app).await.result();
    let line = line_where(&path, "echo", event_named("tools/call", "echo")).await;
    assert_eq!(line["arguments"], json!({"text": SECRET_ARG}), "{line}");
    assert_eq!(line["principal"]["sub"], "anonymous");
}

#[tokio::test]
async fn legacy_and_streamed_calls_are_audited_once_they_end() {
    let (config, _dir, path) = audited(config(), false);
    let app = app(config).await;
    let (session, _) = initialize(&app, "2025-11-25").await;
    Req::legacy("tools/call", json!({"name": "sum", "arguments": {"numbers": [1, 2]}}), Some(&session))
        .send(&app)
        .await
        .result();
    let legacy = line_where(&path, "the legacy sum", event_named("tools/call", "sum")).await;
    assert_eq!((legacy["era"].as_str(), legacy["outcome"].as_str()), (Some("legacy"), Some("ok")), "{legacy}");

    // A progress token over SSE: the call runs in the stream's task, which audits it.
    let streamed = Req::modern(
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}, "_meta": {"progressToken": "p1"}}),
    )
    .send(&app)
    .await;
    assert!(String::from_utf8_lossy(&streamed.body).contains("data:"), "not a stream");
    let line = line_where(&path, "the streamed echo", event_named("tools/call", "echo")).await;
    assert_eq!(line["outcome"], "ok", "{line}");
    assert_eq!(read_lines(&path).iter().filter(|l| l["event"] == "tools/call").count(), 2, "each call once");
}

async fn task_events(path: &Path, id: &str, until: &str) -> Vec<String> {
    line_where(path, until, |l| l["task_id"] == id && l["event"] == until).await;
    read_lines(path)
        .into_iter()
        .filter(|l| l["task_id"] == id && l["event"].as_str().is_some_and(|e| e.starts_with("task.")))
        .map(|l| l["event"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn create_task(app: &Router, tool: &str, args: Value, caps: Value) -> String {
    let created =
        Req::modern_with("tools/call", json!({"name": tool, "arguments": args}), caps).send(app).await.result();
    assert_eq!(created["resultType"], "task", "{created}");
    created["taskId"].as_str().expect("taskId").to_owned()
}

#[tokio::test]
async fn a_tasks_transitions_are_audited_in_order() {
    let (config, _dir, path) = audited(config(), false);
    let app = app(config).await;
    let caps = json!({"elicitation": {}, "extensions": {EXT: {}}});

    // created → working → input_required → (answered) working → completed.
    let id = create_task(&app, "confirm_delete", json!({"filename": "report.pdf"}), caps.clone()).await;
    let call = line_where(&path, "the creating call", |l| l["event"] == "tools/call" && l["task_id"] == id).await;
    assert_eq!((call["outcome"].as_str(), call["name"].as_str()), (Some("task"), Some("confirm_delete")));
    line_where(&path, "input_required", |l| l["task_id"] == id && l["event"] == "task.input_required").await;
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    Req::modern_with("tasks/update", json!({"taskId": id, "inputResponses": answer}), caps.clone())
        .send(&app)
        .await
        .result();
    let events = task_events(&path, &id, "task.completed").await;
    assert_eq!(events, ["task.created", "task.working", "task.input_required", "task.working", "task.completed"]);
    let done = line_where(&path, "completed", |l| l["task_id"] == id && l["event"] == "task.completed").await;
    assert_eq!((done["outcome"].as_str(), done["era"].as_str()), (Some("ok"), Some("modern")), "{done}");
    assert!(done["duration_ms"].is_u64() && done["policy"].is_null(), "{done}");

    // A protocol error fails the task; a cancelled one says so.
    let failing = create_task(&app, "protocol_error_job", json!({}), caps.clone()).await;
    let failed = line_where(&path, "failed", |l| l["task_id"] == failing && l["event"] == "task.failed").await;
    assert_eq!(failed["outcome"], "error");
    let slow = create_task(&app, "slow_compute", json!({"seconds": 30, "label": "x"}), caps.clone()).await;
    Req::modern_with("tasks/cancel", json!({"taskId": slow}), caps).send(&app).await.result();
    let events = task_events(&path, &slow, "task.cancelled").await;
    assert_eq!(events.first().map(String::as_str), Some("task.created"), "{events:?}");
    assert!(!events.contains(&"task.completed".to_owned()), "{events:?}");
}

#[test]
fn audit_settings_load_from_file_and_environment_and_are_validated() {
    let c = mcpgate::config::load_from_str("[audit]\nenabled = true\nsink = \"file\"\npath = \"/tmp/a.jsonl\"\n")
        .expect("valid");
    assert!(c.audit.enabled && !c.audit.include_arguments);
    assert_eq!((c.audit.sink, c.audit.path.as_deref()), (mcpgate::config::AuditSink::File, Some("/tmp/a.jsonl")));
    let env = |var: &str| match var {
        "MCPGATE_AUDIT_ENABLED" => Some("true".to_owned()),
        "MCPGATE_AUDIT_INCLUDE_ARGUMENTS" => Some("true".to_owned()),
        _ => None,
    };
    let c = mcpgate::config::load_with_env("", &env).expect("valid");
    assert!(c.audit.enabled && c.audit.include_arguments && c.audit.sink == mcpgate::config::AuditSink::Stdout);
    for (text, named) in [
        ("[audit]\nsink = \"file\"\n", "audit.path"),
        ("[audit]\npath = \"/tmp/a.jsonl\"\n", "audit.path"),
        ("[audit]\nsink = \"syslog\"\n", "sink"),
    ] {
        let err = mcpgate::config::load_from_str(text).expect_err(text);
        // The error and every cause under it, as the binary's exit message shows them.
        let mut shown = err.to_string();
        let mut cause = std::error::Error::source(&err);
        while let Some(c) = cause {
            shown.push_str(&format!(": {c}"));
            cause = c.source();
        }
        assert!(shown.contains(named), "{named:?} not named in {shown}");
    }
}

#[tokio::test]
async fn a_policy_denial_is_audited_with_its_rule_and_without_arguments() {
    use mcpgate::policy::{Effect, PolicyRule};
    let (mut config, _dir, path) = audited(hs256_config(), false);
    config.policy = vec![PolicyRule::new("no-fail", "tool == 'fail'", Effect::Deny)];
    let app = app(config).await;
    let call = |name: &str, args: Value| {
        Req::modern("tools/call", json!({"name": name, "arguments": args})).header("authorization", &bearer("alice"))
    };
    let denied = call("fail", json!({"text": SECRET_ARG})).send(&app).await;
    assert_eq!(denied.json()["error"]["data"]["rule"], "no-fail", "{}", denied.json());
    call("echo", json!({"text": "x"})).send(&app).await;

    let line = line_where(&path, "the denied fail", event_named("tools/call", "fail")).await;
    assert_eq!((line["outcome"].as_str(), line["policy"].as_str()), (Some("error"), Some("denied")), "{line}");
    assert_eq!(line["policy_rule"], "no-fail", "{line}");
    assert!(!line.to_string().contains(SECRET_ARG), "{line}");
    let allowed = line_where(&path, "the allowed echo", event_named("tools/call", "echo")).await;
    assert_eq!((allowed["policy"].as_str(), &allowed["policy_rule"]), (Some("allowed"), &Value::Null), "{allowed}");
}

#[tokio::test]
async fn a_hidden_denial_answers_not_found_but_is_audited_as_denied_with_its_rule() {
    use mcpgate::policy::{Effect, PolicyRule};
    let (mut config, _dir, path) = audited(hs256_config(), false);
    config.policy_hide_denied = true;
    config.policy = vec![
        PolicyRule::new("no-fail", "tool == 'fail'", Effect::Deny),
        PolicyRule::new("no-readme", "resource == 'mcpgate://demo/readme'", Effect::Deny),
    ];
    let app = app(config).await;
    let hidden = Req::modern("tools/call", json!({"name": "fail", "arguments": {"text": SECRET_ARG}}))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await;
    assert_eq!(hidden.json()["error"]["code"], -32602, "{}", hidden.json());
    assert!(
        hidden.json()["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool")),
        "{}",
        hidden.json()
    );
    let read = Req::modern("resources/read", json!({"uri": "mcpgate://demo/readme"}))
        .header("authorization", &bearer("alice"))
        .send(&app)
        .await;
    assert_eq!(read.json()["error"]["data"]["uri"], "mcpgate://demo/readme", "{}", read.json());

    let line = line_where(&path, "the hidden fail", event_named("tools/call", "fail")).await;
    assert_eq!((line["outcome"].as_str(), line["error_code"].as_i64()), (Some("error"), Some(-32602)), "{line}");
    assert_eq!((line["policy"].as_str(), line["policy_rule"].as_str()), (Some("denied"), Some("no-fail")), "{line}");
    assert!(!line.to_string().contains(SECRET_ARG), "{line}");
    let read = line_where(&path, "the hidden read", event_named("resources/read", "mcpgate://demo/readme")).await;
    assert_eq!((read["policy"].as_str(), read["policy_rule"].as_str()), (Some("denied"), Some("no-readme")), "{read}");
}
