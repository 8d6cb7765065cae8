//! Policy: `[[policy]]` rules decide who may use which tool, prompt or resource, and lists
//! show only what the caller may use. Driven in-process with real JWTs, in both eras.

use serde_json::{Value, json};

use mcpgate::policy::{Effect, PolicyRule};

use crate::support::{Req, app, assert_error, claims, config, error_text, hs, hs256_config, initialize};

/// Names of a list result's entries (`name`, or `uri` / `uriTemplate`).
fn names(result: &Value, key: &str) -> Vec<String> {
    result[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {result}"))
        .iter()
        .map(|e| e["name"].as_str().or(e["uri"].as_str()).or(e["uriTemplate"].as_str()).unwrap_or("").to_owned())
        .collect()
}

fn bearer(req: Req, sub: &str, extra: Value) -> Req {
    let mut c = claims(sub);
    if let (Some(c), Some(extra)) = (c.as_object_mut(), extra.as_object()) {
        c.extend(extra.clone());
    }
    req.header("authorization", &format!("Bearer {}", hs(&c)))
}

#[tokio::test]
async fn a_bad_rule_stops_start_up_naming_it() {
    for (rule, problem) in [
        (
            r#"name = "broken"
when = "tool =="
effect = "deny""#,
            "does not parse",
        ),
        (
            r#"name = "typo-var"
when = "tol == 'echo'"
effect = "deny""#,
            "unknown variable `tol`",
        ),
        (
            r#"name = "typo-fn"
when = "tool.startswth('e')"
effect = "deny""#,
            "unknown function `startswth`",
        ),
        (
            r#"name = "not-a-condition"
when = "tool + 'x'"
effect = "allow""#,
            "must be a condition",
        ),
        (
            r#"name = "bad-effect"
when = "true"
effect = "maybe""#,
            "not a valid rule",
        ),
        (
            r#"name = "default"
when = "true"
effect = "deny""#,
            "rule name",
        ),
    ] {
        let text = format!("toolset = [\"demo\"]\n[[policy]]\n{rule}\n");
        let err = error_text(mcpgate::config::load_from_str(&text).expect_err(&text));
        let name = rule.lines().next().and_then(|l| l.split('"').nth(1)).unwrap_or_default();
        assert!(err.contains(&format!("policy rule {name:?}")), "{name} not named in {err}");
        assert!(err.contains(problem), "{problem:?} not in {err}");
    }
    // Two rules of one name.
    let twice = "toolset = [\"demo\"]\n[[policy]]\nname = \"a\"\nwhen = \"true\"\neffect = \"deny\"\n[[policy]]\nname = \"a\"\nwhen = \"false\"\neffect = \"allow\"\n";
    let err = error_text(mcpgate::config::load_from_str(twice).expect_err("a name used twice"));
    assert!(err.contains("policy rule \"a\"") && err.contains("two rules"), "{err}");
    // A comprehension's own variable is no unknown name; a well-formed file loads, settings
    // on top.
    let good = "policy_default = \"deny\"\npolicy_hide_denied = true\ntoolset = [\"demo\"]\n[[policy]]\nname = \"support\"\nwhen = \"principal.claims.groups.exists(g, g == 'support')\"\neffect = \"allow\"\nmessage = \"hi\"\n";
    let loaded = mcpgate::config::load_from_str(good).expect("a good policy loads");
    assert_eq!(loaded.policy_default, Effect::Deny);
    assert!(loaded.policy_hide_denied);
    assert_eq!(loaded.policy[0].message.as_deref(), Some("hi"));
    // A config built in code is checked when the replica starts.
    let mut c = config();
    c.policy = vec![PolicyRule::new("in-code", "nope(tool)", Effect::Deny)];
    let err = error_text(mcpgate::AppState::new(c).await.expect_err("a bad rule in code"));
    assert!(err.contains("policy rule \"in-code\"") && err.contains("unknown function `nope`"), "{err}");
}

#[tokio::test]
async fn claims_decide_what_each_principal_sees_and_may_call() {
    let mut c = hs256_config();
    c.policy_default = Effect::Deny;
    c.policy = vec![
        PolicyRule::new(
            "contractors-never-delete",
            "principal.claims.role == 'contractor' && tool == 'fail'",
            Effect::Deny,
        )
        .with_message("contractors may not run fail"),
        PolicyRule::new("support-tools", "'support' in principal.claims.groups && upstream == ''", Effect::Allow),
        PolicyRule::new("everyone-echoes", "tool == 'echo'", Effect::Allow),
    ];
    let app = app(c).await;
    let support = json!({"groups": ["support"], "role": "staff"});
    let contractor = json!({"groups": ["support"], "role": "contractor"});

    let list = |sub: &'static str, extra: Value| bearer(Req::modern("tools/list", json!({})), sub, extra);
    let staff_tools = names(&list("alice", support.clone()).send(&app).await.result(), "tools");
    assert!(staff_tools.contains(&"fail".to_owned()) && staff_tools.contains(&"sum".to_owned()), "{staff_tools:?}");
    let contractor_tools = names(&list("carol", contractor.clone()).send(&app).await.result(), "tools");
    assert!(!contractor_tools.contains(&"fail".to_owned()), "{contractor_tools:?}");
    assert!(contractor_tools.contains(&"sum".to_owned()), "{contractor_tools:?}");
    let outsider = list("bob", json!({})).send(&app).await.result();
    assert_eq!(names(&outsider, "tools"), ["echo"], "only the rule that needs no claim");
    assert_eq!(outsider["cacheScope"], "private", "lists differ per caller");
    // Prompts and resources follow the same rules: nothing for an outsider.
    let prompts = bearer(Req::modern("prompts/list", json!({})), "bob", json!({})).send(&app).await.result();
    assert_eq!(names(&prompts, "prompts"), Vec::<String>::new());

    let call = |sub: &'static str, extra: Value, tool: &str| {
        bearer(Req::modern("tools/call", json!({"name": tool, "arguments": {}})), sub, extra)
    };
    let ok = call("alice", support.clone(), "fail").send(&app).await.result();
    assert_eq!(ok["isError"], true, "the tool ran (and failed as it does): {ok}");
    let denied = call("carol", contractor, "fail").send(&app).await;
    let error = assert_error(&denied, 200, -32600);
    assert_eq!(error["error"]["data"]["rule"], "contractors-never-delete", "{error}");
    assert!(error["error"]["message"].as_str().is_some_and(|m| m.contains("contractors may not run fail")), "{error}");
    let by_default =
        bearer(Req::modern("tools/call", json!({"name": "sum", "arguments": {"numbers": [1]}})), "bob", json!({}))
            .send(&app)
            .await;
    let error = assert_error(&by_default, 200, -32600);
    assert_eq!(error["error"]["data"]["rule"], Value::Null, "the default decided: {error}");

    let metrics = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
    assert!(
        metrics.contains("mcpgate_policy_denials_total{server=\"\",rule=\"contractors-never-delete\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("mcpgate_policy_denials_total{server=\"\",rule=\"default\"} 1"), "{metrics}");
    assert!(metrics.contains("mcpgate_policy_denials_total{server=\"\",rule=\"support-tools\"} 0"), "{metrics}");
}

#[tokio::test]
async fn a_rule_on_an_argument_denies_that_call_and_not_the_list_entry() {
    let mut c = config();
    c.policy = vec![
        PolicyRule::new("no-secrets", "tool == 'echo' && arguments.text.contains('secret')", Effect::Deny)
            .with_message("echo does not repeat secrets"),
    ];
    let app = app(c).await;
    let echo = |text: &str| Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": text}}));
    let ok = echo("hello").send(&app).await.result();
    assert_eq!(ok["content"][0]["text"], "hello", "{ok}");
    let denied = echo("my secret").send(&app).await;
    let error = assert_error(&denied, 200, -32600);
    assert_eq!(error["error"]["data"]["rule"], "no-secrets");
    assert!(!denied.body.windows(9).any(|w| w == b"my secret"), "the arguments are never echoed");
    // A call without the argument fails the rule's evaluation: a deny rule that cannot be
    // decided denies the call ...
    let missing = Req::modern("tools/call", json!({"name": "echo", "arguments": {}})).send(&app).await;
    assert_eq!(assert_error(&missing, 200, -32600)["error"]["data"]["rule"], "no-secrets");
    // ... while the list (no arguments) still shows the tool.
    let tools = names(&Req::modern("tools/list", json!({})).send(&app).await.result(), "tools");
    assert!(tools.contains(&"echo".to_owned()), "{tools:?}");
    // The same in a 2025-11-25 session.
    let (session, _) = initialize(&app, "2025-11-25").await;
    let legacy = Req::legacy("tools/call", json!({"name": "echo", "arguments": {"text": "secret"}}), Some(&session))
        .send(&app)
        .await;
    assert_eq!(assert_error(&legacy, 200, -32600)["error"]["data"]["rule"], "no-secrets");
}

#[tokio::test]
async fn hide_denied_answers_like_an_unknown_tool_prompt_or_resource() {
    let mut c = config();
    c.policy_default = Effect::Deny;
    c.policy_hide_denied = true;
    c.policy = vec![PolicyRule::new("echo-only", "tool == 'echo'", Effect::Allow)];
    let app = app(c).await;
    let unknown = assert_error(
        &Req::modern("tools/call", json!({"name": "nope", "arguments": {}})).send(&app).await,
        200,
        -32602,
    );
    let hidden = assert_error(
        &Req::modern("tools/call", json!({"name": "sum", "arguments": {"numbers": [1]}})).send(&app).await,
        200,
        -32602,
    );
    assert_eq!(
        hidden["error"]["message"].as_str().map(|m| m.replace("sum", "nope")),
        unknown["error"]["message"].as_str().map(str::to_owned),
        "a hidden tool reads as an unknown one"
    );
    assert!(hidden["error"].get("data").is_none_or(|d| d.get("rule").is_none()), "{hidden}");
    let prompt = Req::modern("prompts/get", json!({"name": "test_simple_prompt"})).send(&app).await;
    assert!(
        assert_error(&prompt, 200, -32602)["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown prompt"))
    );
    let read = Req::modern("resources/read", json!({"uri": "test://static-text"})).send(&app).await;
    assert_eq!(assert_error(&read, 200, -32602)["error"]["data"]["uri"], "test://static-text");
    for (method, key) in [
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let result = Req::modern(method, json!({})).send(&app).await.result();
        assert_eq!(names(&result, key), Vec::<String>::new(), "{method}");
    }
    assert_eq!(names(&Req::modern("tools/list", json!({})).send(&app).await.result(), "tools"), ["echo"]);
    let metrics = String::from_utf8_lossy(&Req::get("/metrics").send(&app).await.body).into_owned();
    assert!(
        metrics.contains("mcpgate_policy_denials_total{server=\"\",rule=\"default\"} 3"),
        "hidden denials count: {metrics}"
    );
}

/// A resource rule sees the URI in its normal form (RFC 3986 §6.2.2), whatever the caller's
/// spelling: escaped unreserved characters, the scheme's or host's case and dot segments do not
/// get past it, and a URI that still holds an escaped separator (or a control character) is
/// refused before anything reads it.
#[tokio::test]
async fn a_resource_rule_sees_the_normalized_uri_and_escaped_separators_are_refused() {
    let mut c = config();
    c.policy = vec![PolicyRule::new("no-secret", "resource == 'test://template/secret/data'", Effect::Deny)];
    let app = app(c).await;
    let read = |uri: &str| Req::modern("resources/read", json!({"uri": uri}));
    for spelling in [
        "test://template/secret/data",
        "test://template/%73ecret/data",
        "test://template/%73%65%63%72%65%74/data",
        "TEST://Template/secret/data",
        "test://template/public/../secret/data",
        "test://template/./secret/./data",
    ] {
        let denied = assert_error(&read(spelling).send(&app).await, 200, -32600);
        assert_eq!(denied["error"]["data"]["rule"], "no-secret", "{spelling}: {denied}");
    }
    for refused in [
        "test://template/a%2Fb/data",
        "test://template/a%2fb/data",
        "test://template/a%5Cb/data",
        "test://template/secret%00/data",
        "test://template/secret/data%23x",
        "test://template/se%ZZcret/data",
    ] {
        let error = assert_error(&read(refused).send(&app).await, 200, -32602);
        let message = error["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Invalid resource URI"), "{refused:?}: {error}");
    }
    // The positive control: another id is read, and an escaped spelling of it reads the same.
    for spelling in ["test://template/public/data", "test://template/%70ublic/data"] {
        let result = read(spelling).send(&app).await.result();
        assert_eq!(result["contents"][0]["uri"], "test://template/public/data", "{spelling}: {result}");
        assert!(result["contents"][0]["text"].as_str().is_some_and(|t| t.contains("Data for ID: public")), "{result}");
    }
}
