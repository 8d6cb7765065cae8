//! Who may call what, through nginx in front of three replicas sharing Redis, with real
//! upstreams (`server-everything` over stdio, a FastMCP server over HTTP): two principals with
//! different claims see different lists and get different answers for the same tool, one rule
//! reads an argument; a virtual server on its own path lists only its bundle, with a renamed
//! tool whose hidden argument the upstream receives; a search server finds and calls tools; a
//! pinned upstream whose definition changes has that tool withheld on every replica until
//! `mcpgate admin tools approve`; the audit trail has a line for each, and no arguments; a bad
//! rule stops start-up with its name.

use std::path::Path;

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, HttpServer, Look, PATIENCE, free_port, run_to_end, server_everything, wait_for};

const TOKEN: &str = "admin-token-for-the-governed-fleet-0123456789";
const FIXTURE: &str = "fastmcp_governed_server.py";
const HONEST: &str = "Look a key up";
const CHANGED: &str = "Look a key up and mail the result to a stranger";

/// Root rules: contractors may not delete or sum; nobody echoes a secret. `support` lets only
/// staff look things up; `finder` offers every tool by search.
fn config(everything: &Path, gov_url: &str) -> String {
    format!(
        r#"
[audit]
enabled = true
sink = "file"

[[policy]]
name = "contractors-no-delete"
when = 'principal.claims.role == "contractor" && tool in ["gov_delete_repository", "everything_get-sum"]'
effect = "deny"
message = "contractors may not delete repositories or add things up"

[[policy]]
name = "no-secret-echo"
when = 'tool == "everything_echo" && arguments.message.startsWith("secret")'
effect = "deny"
message = "secrets are not echoed"

[[upstream]]
name = "everything"
transport = "stdio"
command = "node"
args = ["{everything}", "stdio"]

[[upstream]]
name = "gov"
transport = "http"
url = "{gov_url}"
pin = "first-seen"

[upstream.overrides.ticket]
rename = "open_ticket"
title = "Open a support ticket"
description = "Opens a ticket for the support team"
hidden = {{ team = "support" }}

[[server]]
name = "support"
title = "Support desk"
instructions = "Tools for the support bot"
tools = ["open_ticket", "gov_lookup"]

[[server.policy]]
name = "support-lookup-staff-only"
when = 'tool == "gov_lookup" && principal.claims.role != "staff"'
effect = "deny"

[[server]]
name = "finder"
discovery = "search"
tools = ["*"]
"#,
        everything = everything.display()
    )
}

/// One principal's view of the deployment.
struct Caller<'a> {
    client: &'a Client,
    auth: String,
}

impl Caller<'_> {
    async fn modern(&self, url: &str, method: &str, params: Value) -> anyhow::Result<Value> {
        let reply = self.client.modern_with(url, &[("authorization", &self.auth)], method, params).await?;
        Ok(reply.json()?)
    }

    async fn call(&self, url: &str, tool: &str, arguments: Value) -> anyhow::Result<Value> {
        self.modern(url, "tools/call", json!({"name": tool, "arguments": arguments})).await
    }

    async fn tools(&self, url: &str) -> anyhow::Result<Vec<String>> {
        let list = self.modern(url, "tools/list", json!({})).await?;
        let mut names: Vec<String> = list["result"]["tools"]
            .as_array()
            .ok_or_else(|| anyhow::anyhow!("no tools in {list}"))?
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }
}

fn text(reply: &Value) -> String {
    reply["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// A policy denial: -32600 naming the rule.
#[track_caller]
fn assert_denied(reply: &Value, rule: &str) {
    assert_eq!(reply["error"]["code"], -32600, "{reply}");
    assert_eq!(reply["error"]["data"]["rule"], rule, "{reply}");
}

/// `mcpgate admin --url <url> <args>`: its exit, stdout and stderr.
fn admin(url: &str, args: &[&str]) -> anyhow::Result<(bool, String, String)> {
    let mut all = vec!["admin", "--url", url];
    all.extend_from_slice(args);
    let (status, stdout, stderr) = run_to_end(&all, &[("MCPGATE_ADMIN_TOKEN", TOKEN)])?;
    Ok((status.success(), stdout, stderr))
}

/// Every audit line the replicas wrote.
fn audit_lines(dir: &Path) -> anyhow::Result<Vec<Value>> {
    let mut lines = Vec::new();
    for i in 0..3 {
        let path = dir.join(format!("audit-{i}.jsonl"));
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        for line in text.lines() {
            assert!(!line.contains("secret plans") && !line.contains("printer jam"), "arguments in the trail: {line}");
            let event: Value = serde_json::from_str(line)?;
            assert!(event.get("arguments").is_none(), "arguments in the trail: {line}");
            lines.push(event);
        }
    }
    Ok(lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_servers_overrides_search_pinning_and_the_audit_trail_across_three_replicas() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let everything = server_everything()?;
    let port = free_port()?;
    let mut gov = HttpServer::fastmcp_script_on(FIXTURE, dir.path(), port, &[("LOOKUP_DESCRIPTION", HONEST)])?;
    let config_path = dir.path().join("mcpgate.toml");
    std::fs::write(&config_path, config(&everything, &gov.url()))?;
    let mut builder = crate::jwt::with_jwt(Cluster::builder(3))
        .env("MCPGATE_FEDERATION_LIST_REFRESH_SECS", "1")
        .env("MCPGATE_ADMIN_LISTEN", "127.0.0.1:0")
        .env("MCPGATE_ADMIN_TOKEN", TOKEN)
        .args(&["--config", &config_path.to_string_lossy()]);
    for i in 0..3 {
        let path = dir.path().join(format!("audit-{i}.jsonl"));
        builder = builder.replica_env(i, "MCPGATE_AUDIT_PATH", &path.to_string_lossy());
    }
    let cluster = builder.start()?;
    let client = Client::new()?;
    let alice = Caller { client: &client, auth: crate::jwt::bearer_with("alice", &json!({"role": "staff"}))? };
    let bob = Caller { client: &client, auth: crate::jwt::bearer_with("bob", &json!({"role": "contractor"}))? };
    let lb = cluster.url();
    let base = lb.trim_end_matches("/mcp").to_owned();
    let support = format!("{base}/servers/support/mcp");
    let finder = format!("{base}/servers/finder/mcp");

    // Both upstreams are up on every replica.
    for i in 0..3 {
        let url = cluster.replica_url(i);
        wait_for(format!("replica {i} to list both upstreams' tools"), PATIENCE, async || {
            let names = alice.tools(&url).await?;
            let both = names.iter().any(|n| n == "everything_echo") && names.iter().any(|n| n == "gov_lookup");
            Ok(if both { Look::Done(()) } else { Look::not_yet(names) })
        })
        .await;
    }

    // Different claims, different lists: a caller never sees what it may not use.
    let alices = alice.tools(&lb).await?;
    let bobs = bob.tools(&lb).await?;
    for tool in ["gov_delete_repository", "everything_get-sum"] {
        assert!(alices.iter().any(|n| n == tool), "alice sees {tool}: {alices:?}");
        assert!(!bobs.iter().any(|n| n == tool), "bob does not see {tool}: {bobs:?}");
    }
    for names in [&alices, &bobs] {
        assert!(names.iter().any(|n| n == "open_ticket") && !names.iter().any(|n| n == "gov_ticket"), "{names:?}");
        assert!(names.iter().any(|n| n == "everything_echo"), "{names:?}");
    }
    // The same tool: allowed for one, denied for the other with the rule's message.
    let denied = bob.call(&lb, "gov_delete_repository", json!({"name": "infra"})).await?;
    assert_denied(&denied, "contractors-no-delete");
    assert!(denied["error"]["message"].as_str().is_some_and(|m| m.contains("may not delete")), "{denied}");
    assert_eq!(text(&alice.call(&lb, "gov_delete_repository", json!({"name": "infra"})).await?), "deleted infra");
    // A rule on an argument.
    assert_denied(&alice.call(&lb, "everything_echo", json!({"message": "secret plans"})).await?, "no-secret-echo");
    assert_eq!(text(&alice.call(&lb, "everything_echo", json!({"message": "hello"})).await?), "Echo: hello");

    // A virtual server lists only its bundle; its renamed tool gets its hidden argument.
    assert_eq!(alice.tools(&support).await?, ["gov_lookup", "open_ticket"]);
    assert_eq!(bob.tools(&support).await?, ["open_ticket"], "support's own rule");
    let listed = alice.modern(&support, "tools/list", json!({})).await?;
    let ticket = listed["result"]["tools"].as_array().into_iter().flatten().find(|t| t["name"] == "open_ticket");
    let ticket = ticket.cloned().unwrap_or_default();
    assert_eq!(ticket["title"], "Open a support ticket", "{ticket}");
    assert!(ticket["inputSchema"]["properties"].get("team").is_none(), "hidden from the schema: {ticket}");
    let opened = alice.call(&support, "open_ticket", json!({"title": "printer jam"})).await?;
    assert_eq!(text(&opened), "ticket for support (normal): printer jam", "the upstream saw the injected team");
    let sent_team = alice.call(&support, "open_ticket", json!({"title": "x", "team": "finance"})).await?;
    assert_eq!(sent_team["error"]["code"], -32602, "{sent_team}");
    let outside = alice.call(&support, "everything_echo", json!({"message": "hi"})).await?;
    assert_eq!(outside["error"]["code"], -32602, "not in the bundle: {outside}");
    // Its own serverInfo in the other era too.
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let reply = client.legacy_with(&support, &[("authorization", &alice.auth)], "initialize", init, None).await?;
    let session = reply.session.clone().ok_or_else(|| anyhow::anyhow!("no session: {}", reply.body))?;
    let result: Value = reply.json()?;
    assert_eq!(result["result"]["serverInfo"]["title"], "Support desk", "{result}");
    let listed = client
        .legacy_with(&support, &[("authorization", &alice.auth)], "tools/list", json!({}), Some(&session))
        .await?
        .json()?;
    assert_eq!(listed["result"]["tools"].as_array().map(Vec::len), Some(2), "{listed}");

    // Search discovery: two tools; a search finds, call_tool calls, under the same rules.
    assert_eq!(alice.tools(&finder).await?, ["call_tool", "search_tools"]);
    let found = alice.call(&finder, "search_tools", json!({"query": "delete repository"})).await?;
    assert_eq!(found["result"]["structuredContent"]["tools"][0]["name"], "gov_delete_repository", "{found}");
    // Bob's search answers (a list, not an error) without the tool his rule denies.
    let hidden = bob.call(&finder, "search_tools", json!({"query": "delete repository"})).await?;
    assert!(hidden.get("error").is_none() && hidden["result"]["isError"] != true, "bob's search answers: {hidden}");
    let names: Vec<&str> = hidden["result"]["structuredContent"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("a list of tools: {hidden}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(!names.contains(&"gov_delete_repository"), "bob never finds it: {names:?}");
    // The same search finds for bob what he may use.
    let echo = bob.call(&finder, "search_tools", json!({"query": "echo"})).await?;
    let found = echo["result"]["structuredContent"]["tools"].as_array().cloned().unwrap_or_default();
    assert!(found.iter().any(|t| t["name"] == "everything_echo"), "bob finds what he may use: {echo}");
    let called = alice
        .call(&finder, "call_tool", json!({"name": "everything_echo", "arguments": {"message": "via search"}}))
        .await?;
    assert_eq!(text(&called), "Echo: via search", "{called}");
    let refused = bob.call(&finder, "call_tool", json!({"name": "gov_delete_repository", "arguments": {"name": "x"}}));
    assert_denied(&refused.await?, "contractors-no-delete");

    // The pinned upstream comes back with another description of lookup: withheld on every
    // replica (lists and calls) until an operator approves it.
    gov.kill();
    drop(gov);
    let gov = HttpServer::fastmcp_script_on(FIXTURE, dir.path(), port, &[("LOOKUP_DESCRIPTION", CHANGED)])?;
    for i in 0..3 {
        let url = cluster.replica_url(i);
        wait_for(format!("replica {i} to withhold gov_lookup"), PATIENCE, async || {
            let names = alice.tools(&url).await?;
            let withheld = !names.iter().any(|n| n == "gov_lookup") && names.iter().any(|n| n == "open_ticket");
            Ok(if withheld { Look::Done(()) } else { Look::not_yet(names) })
        })
        .await;
        let call = alice.call(&url, "gov_lookup", json!({"key": "k"})).await?;
        assert_eq!(call["error"]["code"], -32602, "replica {i} ran a withheld tool: {call}");
    }
    assert_eq!(alice.tools(&support).await?, ["open_ticket"], "withheld on the server too");
    let api = |i: usize| format!("http://{}", cluster.replica(i).admin_addr().unwrap_or("none"));
    let (ok, out, err) = admin(&api(0), &["tools", "diff", "--json"])?;
    anyhow::ensure!(ok, "diff: {err}");
    let diff: Value = serde_json::from_str(&out)?;
    let entry = &diff["withheld"][0];
    assert_eq!(entry["tool"], "lookup", "{diff}");
    let hash = entry["hash"].as_str().unwrap_or_default().to_owned();
    let (ok, out, err) =
        admin(&api(2), &["tools", "approve", "--upstream", "gov", "--tool", "lookup", "--hash", &hash])?;
    assert!(ok, "{out}{err}");
    for i in 0..3 {
        let url = cluster.replica_url(i);
        wait_for(format!("replica {i} to list the approved gov_lookup"), PATIENCE, async || {
            let names = alice.tools(&url).await?;
            Ok(names.iter().any(|n| n == "gov_lookup"))
        })
        .await;
        // Its breaker may still be open from the restart (retried within seconds).
        wait_for(format!("replica {i} to run the approved gov_lookup"), PATIENCE, async || {
            let reply = alice.call(&url, "gov_lookup", json!({"key": "k"})).await?;
            Ok(if text(&reply) == "found k" { Look::Done(()) } else { Look::not_yet(reply) })
        })
        .await;
    }

    // The trail: a line for each of these, never the arguments (checked line by line).
    let lines = wait_for("the audit lines of the last calls", PATIENCE, async || {
        let lines = audit_lines(dir.path())?;
        let approved_call = lines.iter().filter(|l| l["name"] == "gov_lookup" && l["outcome"] == "ok").count();
        Ok(if approved_call >= 3 { Look::Done(lines) } else { Look::not_yet(approved_call) })
    })
    .await;
    let has = |what: &str, matches: &dyn Fn(&Value) -> bool| {
        assert!(lines.iter().any(matches), "no audit line for {what}");
    };
    has("bob's denied delete", &|l| {
        l["name"] == "gov_delete_repository"
            && l["principal"]["sub"] == "bob"
            && l["policy"] == "denied"
            && l["policy_rule"] == "contractors-no-delete"
            && l["upstream"] == "gov"
    });
    has("alice's allowed delete", &|l| {
        l["name"] == "gov_delete_repository" && l["principal"]["sub"] == "alice" && l["outcome"] == "ok"
    });
    has("the secret echo", &|l| l["name"] == "everything_echo" && l["policy_rule"] == "no-secret-echo");
    has("the ticket through support", &|l| {
        l["name"] == "open_ticket" && l["server"] == "support" && l["upstream"] == "gov" && l["outcome"] == "ok"
    });
    has("the echo through call_tool", &|l| {
        l["name"] == "everything_echo" && l["server"] == "finder" && l["outcome"] == "ok"
    });
    has("a search", &|l| l["name"] == "search_tools" && l["server"] == "finder");
    has("a withheld call", &|l| l["name"] == "gov_lookup" && l["outcome"] == "error" && l["error_code"] == -32602);
    let replicas: std::collections::HashSet<&str> = lines.iter().filter_map(|l| l["replica"].as_str()).collect();
    assert_eq!(replicas.len(), 3, "every replica wrote its part: {replicas:?}");
    drop(gov);
    Ok(())
}

#[test]
fn a_bad_rule_stops_start_up_with_its_name() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for (table, name) in [
        ("[[policy]]\nname = \"broken-root-rule\"\nwhen = \"tool ==\"\neffect = \"deny\"\n", "broken-root-rule"),
        (
            "[[server]]\nname = \"s\"\ntools = [\"*\"]\n[[server.policy]]\nname = \"broken-server-rule\"\nwhen = \"nosuch(tool)\"\neffect = \"deny\"\n",
            "broken-server-rule",
        ),
    ] {
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, format!("toolset = [\"demo\"]\n{table}"))?;
        let (status, stdout, stderr) =
            run_to_end(&["--config", &path.to_string_lossy(), "--listen", "127.0.0.1:0"], &[])?;
        assert!(!status.success(), "started with a bad rule: {stdout}");
        assert!(stderr.contains(name), "the error names {name}: {stderr}");
    }
    Ok(())
}
