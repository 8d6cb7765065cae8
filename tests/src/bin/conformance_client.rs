//! `mcpgate-conformance-client`: mcpgate as the client under test of the MCP conformance
//! suite's client scenarios (`conformance client --command mcpgate-conformance-client`).
//!
//! The suite starts a scenario server and runs this program with the server's URL as the last
//! argument (and `MCP_CONFORMANCE_SCENARIO`, `MCP_CONFORMANCE_PROTOCOL_VERSION`,
//! `MCP_CONFORMANCE_CONTEXT` in the environment). It starts `mcpgate` (`MCPGATE_BIN`, or the
//! one next to this program) with that URL as its only upstream, then acts as a client of
//! mcpgate: lists the upstream's tools, resources and prompts through the gateway and calls,
//! reads and gets each one (arguments from the scenario's context, else made from the tool's
//! schema), answering any input the gateway relays. A 2026-07-28 run speaks the modern era to
//! mcpgate, an earlier one a 2025-11-25 session, so both of the gateway's surfaces face the
//! upstream. So what the scenario server sees is mcpgate's own client behaviour.
//!
//! Invariant: bounded in time (the whole run ends within `DEADLINE`) and mcpgate is killed at
//! the end whatever happens; exits non-zero when anything the client does fails.

use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::{Map, Value, json};

use mcpgate_e2e::{Client, Gateway, Look, Reply, wait_for};
use mcpgate_protocol::ProtocolVersion;
use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use mcpgate_protocol::mirrored;

/// The whole run ends within this (the suite's own client timeout is 30 s).
const DEADLINE: Duration = Duration::from_secs(25);
/// The upstream's name in mcpgate's config: its entries are exposed as `up_<name>`.
const UPSTREAM: &str = "up";
const PREFIX: &str = "up_";
const MODERN: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

#[allow(clippy::print_stderr, reason = "the suite shows the client's stderr when a scenario fails")]
fn main() {
    if let Err(e) = run() {
        eprintln!("mcpgate-conformance-client: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let url = std::env::args().skip(1).last().context("usage: mcpgate-conformance-client <server-url>")?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    let version = std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_else(|_| "2025-11-25".to_owned());
    let context: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or(Value::Null);
    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let config = dir.path().join("mcpgate.toml");
    std::fs::write(&config, upstream_config(&url, &scenario))?;
    let gateway = Gateway::builder().args(&["--config", &config.to_string_lossy()]).start()?;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let session = Session { client: Client::new()?, url: gateway.url(), modern: version == MODERN, id: None };
    let outcome = runtime.block_on(async {
        tokio::time::timeout(DEADLINE, session.exercise(&context))
            .await
            .unwrap_or_else(|_| bail!("not done within {DEADLINE:?}"))
    });
    // Kept by the suite (stderr.txt of the scenario's results): what mcpgate did.
    #[allow(clippy::print_stderr, reason = "mcpgate's log explains a run")]
    {
        eprintln!("--- mcpgate log ---\n{}", gateway.logs());
    }
    drop(gateway);
    outcome
}

/// mcpgate's config: the scenario server as its only upstream (Streamable HTTP, era auto).
fn upstream_config(url: &str, scenario: &str) -> String {
    // The elicitation scenario's server asks mid-call (2025-11-25 elicitation/create on the
    // call's stream): only a gateway task can carry the question to the client and back.
    let task = if scenario == "elicitation-sep1034-client-defaults" { "task = \"always\"\n" } else { "" };
    // Start-up waits at most 5 s for the upstream's lists, so the run stays within DEADLINE.
    format!(
        "[federation]\nstartup_wait_secs = 5\n\n[[upstream]]\nname = \"{UPSTREAM}\"\ntransport = \"http\"\nurl = {url:?}\n{task}"
    )
}

/// A client of mcpgate, in one era.
struct Session {
    client: Client,
    url: String,
    modern: bool,
    /// The legacy session id.
    id: Option<String>,
}

impl Session {
    async fn exercise(mut self, context: &Value) -> anyhow::Result<()> {
        if !self.modern {
            let init = json!({
                "protocolVersion": "2025-11-25",
                "capabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
                "clientInfo": {"name": "mcpgate-conformance-client", "version": "1"},
            });
            let reply = self.client.legacy(&self.url, "initialize", init, None).await?;
            self.id = Some(reply.session.clone().with_context(|| format!("no session id: {}", reply.body))?);
            self.client
                .post(
                    &self.url,
                    &self.legacy_headers(),
                    json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
                )
                .await?;
        }
        let tools = self.list("tools/list", "tools").await?;
        for tool in &tools {
            let name = tool["name"].as_str().unwrap_or_default();
            let Some(remote) = name.strip_prefix(PREFIX) else { continue };
            let arguments = arguments_for(remote, tool, &tools, context);
            let result = self.call(tool, arguments).await.with_context(|| format!("calling {name}"))?;
            #[allow(clippy::print_stderr, reason = "the suite keeps the client's stderr")]
            {
                eprintln!("{name}: {result}");
            }
            anyhow::ensure!(result.get("content").is_some(), "{name}: not a tool result: {result}");
        }
        for resource in self.list("resources/list", "resources").await? {
            let Some(uri) = resource["uri"].as_str() else { continue };
            self.request("resources/read", json!({"uri": uri}), &[]).await.with_context(|| format!("reading {uri}"))?;
        }
        for prompt in self.list("prompts/list", "prompts").await? {
            let Some(name) = prompt["name"].as_str().filter(|n| n.starts_with(PREFIX)) else { continue };
            let arguments: Map<String, Value> = prompt["arguments"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| a["required"] == json!(true))
                .filter_map(|a| Some((a["name"].as_str()?.to_owned(), json!("test"))))
                .collect();
            self.request("prompts/get", json!({"name": name, "arguments": arguments}), &[])
                .await
                .with_context(|| format!("getting prompt {name}"))?;
        }
        Ok(())
    }

    /// Every page of a list.
    async fn list(&self, method: &str, member: &str) -> anyhow::Result<Vec<Value>> {
        let mut items = Vec::new();
        let mut params = json!({});
        for _ in 0..20 {
            let result = self.request(method, params, &[]).await?;
            items.extend(result[member].as_array().cloned().unwrap_or_default());
            match result["nextCursor"].as_str() {
                Some(cursor) if !cursor.is_empty() => params = json!({"cursor": cursor}),
                _ => break,
            }
        }
        Ok(items)
    }

    /// Calls a tool, answering input rounds, following a task to its end.
    async fn call(&self, tool: &Value, arguments: Value) -> anyhow::Result<Value> {
        let headers = param_headers(&tool["inputSchema"], &arguments);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let mut params = json!({"name": tool["name"], "arguments": arguments});
        // A 2025-11-25 client asks for a task where the tool requires one.
        if !self.modern && tool["execution"]["taskSupport"] == "required" {
            params["task"] = json!({});
        }
        for _ in 0..8 {
            let result = self.request("tools/call", params.clone(), &headers).await?;
            match result["resultType"].as_str() {
                Some("input_required") => {
                    params["inputResponses"] = answers(&result["inputRequests"]);
                    match result.get("requestState") {
                        Some(state) => params["requestState"] = state.clone(),
                        None => _ = params.as_object_mut().map(|p| p.remove("requestState")),
                    }
                }
                Some("task") => return self.follow(&result).await,
                _ if result.get("task").is_some() => return self.follow(&result["task"]).await,
                _ => return Ok(result),
            }
        }
        bail!("still asking for input after 8 rounds")
    }

    /// Polls a task to its end, answering what it asks.
    async fn follow(&self, task: &Value) -> anyhow::Result<Value> {
        let id = task["taskId"].as_str().context("a task without an id")?.to_owned();
        let what = format!("task {id} to end");
        let result = wait_for(what, Duration::from_secs(20), async || {
            let got = self.request("tasks/get", json!({"taskId": id}), &[]).await?;
            Ok(match got["status"].as_str() {
                Some("completed") if self.modern => Look::Done(got["result"].clone()),
                Some("completed" | "failed") if !self.modern => {
                    Look::Done(self.request("tasks/result", json!({"taskId": id}), &[]).await?)
                }
                Some("input_required") if !self.modern => Look::Done(self.legacy_result(&id).await?),
                Some("failed" | "cancelled") => bail!("task {id} ended {got}"),
                Some("input_required") if self.modern => {
                    if let Some(requests) = got.get("inputRequests") {
                        let update = json!({"taskId": id, "inputResponses": answers(requests)});
                        self.request("tasks/update", update, &[]).await?;
                    }
                    Look::not_yet(got)
                }
                _ => Look::not_yet(got),
            })
        })
        .await;
        Ok(result)
    }

    /// A 2025-11-25 task's result from `tasks/result`, whose stream carries the task's
    /// questions first (server→client requests, answered with POSTed responses).
    async fn legacy_result(&self, id: &str) -> anyhow::Result<Value> {
        let session = self.id.as_deref().context("no session")?;
        let mut stream = self.client.legacy_stream(&self.url, "tasks/result", json!({"taskId": id}), session).await?;
        loop {
            let message = stream.next(Duration::from_secs(15)).await?.context("tasks/result ended early")?;
            if let (Some(method), Some(asked)) = (message["method"].as_str(), message.get("id")) {
                let answer = &answers(&json!({"q": {"method": method, "params": message["params"]}}))["q"];
                let body = json!({"jsonrpc": "2.0", "id": asked, "result": answer}).to_string();
                self.client.post(&self.url, &self.legacy_headers(), body).await?;
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("tasks/result: {error}");
            }
            if let Some(result) = message.get("result") {
                return Ok(result.clone());
            }
        }
    }

    /// One request in the session's era; its result (a JSON-RPC error fails).
    async fn request(&self, method: &str, mut params: Value, extra: &[(&str, &str)]) -> anyhow::Result<Value> {
        let reply = if self.modern {
            let mut caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
            caps["extensions"] = json!({ TASKS: {} });
            params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": caps});
            self.client.modern_with(&self.url, extra, method, params).await?
        } else {
            self.client.legacy_with(&self.url, extra, method, params, self.id.as_deref()).await?
        };
        let message = last_message(&reply)?;
        if let Some(error) = message.get("error") {
            bail!("{method}: HTTP {}: {error}", reply.status);
        }
        message.get("result").cloned().with_context(|| format!("{method}: no result: {}", reply.body))
    }

    /// The headers of the session's POSTs that are not requests (a notification, responses).
    fn legacy_headers(&self) -> Vec<(&str, &str)> {
        match &self.id {
            Some(id) => {
                vec![(MCP_SESSION_ID, id.as_str()), (MCP_PROTOCOL_VERSION, ProtocolVersion::LATEST_LEGACY.as_str())]
            }
            None => Vec::new(),
        }
    }
}

/// The response in a reply (a JSON body, or the last response on an SSE stream).
fn last_message(reply: &Reply) -> anyhow::Result<Value> {
    if reply.content_type.starts_with("text/event-stream") {
        return reply
            .events()?
            .into_iter()
            .rev()
            .find(|m| m.get("result").is_some() || m.get("error").is_some())
            .with_context(|| format!("no response on the stream: {}", reply.body));
    }
    Ok(reply.json()?)
}

/// A tool's arguments: the scenario's, else special cases, else made from its schema.
fn arguments_for(remote: &str, tool: &Value, tools: &[Value], context: &Value) -> Value {
    let given = context["toolCalls"].as_array().into_iter().flatten().find(|c| c["name"] == remote);
    if let Some(call) = given {
        return call["arguments"].clone();
    }
    // json-schema-2020-12-preservation: echo back the schema mcpgate listed for the focal tool.
    if remote == "json_schema_echo" {
        let focal = tools.iter().find(|t| t["name"] == format!("{PREFIX}json_schema_2020_12_tool"));
        return json!({"schema": focal.map_or(json!({}), |t| t["inputSchema"].clone())});
    }
    sample(&tool["inputSchema"])
}

/// A value for a schema: its required properties, each of its type.
fn sample(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("object") | None => {
            let mut out = Map::new();
            for key in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                out.insert(key.to_owned(), sample(&schema["properties"][key]));
            }
            Value::Object(out)
        }
        Some("string") => json!("test"),
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some(_) => Value::Null,
    }
}

/// `Mcp-Param-*` headers for the arguments of a tool whose schema annotates properties with
/// `x-mcp-header` (SEP-2243: strings, integers and booleans; absent or null: no header).
fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .filter_map(|(key, property)| {
            let header = property["x-mcp-header"].as_str()?;
            let text = mirrored::param_text(arguments.get(key)?)?;
            Some((mirrored::param_header(header), mirrored::encode(&text).into_owned()))
        })
        .collect()
}

/// Answers to input requests: elicitations accepted with the schema's values, a canned
/// sample, no roots.
fn answers(requests: &Value) -> Value {
    let mut out = Map::new();
    for (key, request) in requests.as_object().into_iter().flatten() {
        let answer = match request["method"].as_str() {
            Some("elicitation/create") => {
                json!({"action": "accept", "content": sample(&request["params"]["requestedSchema"])})
            }
            Some("sampling/createMessage") => json!({
                "role": "assistant",
                "content": {"type": "text", "text": "sampled by mcpgate-conformance-client"},
                "model": "mcpgate-conformance-client",
                "stopReason": "endTurn",
            }),
            Some("roots/list") => json!({"roots": []}),
            _ => continue,
        };
        out.insert(key.clone(), answer);
    }
    Value::Object(out)
}
