//! A client of mcpgate in one era (a 2026-07-28 client, or a 2025-11-25 session): lists every
//! page, calls tools answering their input rounds, follows tasks to their end (answering what
//! they ask), reads resources and gets prompts.

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use serde_json::{Map, Value, json};

use mcpgate_e2e::{Client, Look, Reply, wait_for};
use mcpgate_protocol::ProtocolVersion;
use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};

use crate::answers::{answers, arguments_for, param_headers};
use crate::setup::PREFIX;

const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A client of mcpgate, in one era.
pub(super) struct Session {
    pub(super) client: Client,
    pub(super) url: String,
    pub(super) modern: bool,
    /// The legacy session id.
    pub(super) id: Option<String>,
    /// The caller's `Authorization` (auth/* runs: mcpgate then requires a JWT).
    pub(super) bearer: Option<String>,
    /// Whether the client declares URL elicitation (auth/* runs: so the gateway asks for a
    /// connection by URL elicitation, or -32042 in a 2025-11-25 session).
    pub(super) url_elicitation: bool,
}

impl Session {
    pub(super) async fn exercise(mut self, context: &Value) -> anyhow::Result<()> {
        self.initialize().await?;
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

    /// The elicitation capability the client declares.
    fn elicitation(&self) -> Value {
        if self.url_elicitation { json!({"form": {}, "url": {}}) } else { json!({}) }
    }

    /// The caller's credentials, as extra headers of every request.
    fn auth_headers(&self) -> Vec<(&str, &str)> {
        self.bearer.as_deref().map(|b| ("authorization", b)).into_iter().collect()
    }

    /// Opens the 2025-11-25 session (a 2026-07-28 client has none).
    pub(super) async fn initialize(&mut self) -> anyhow::Result<()> {
        if self.modern {
            return Ok(());
        }
        let init = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": self.elicitation(), "sampling": {}, "roots": {}},
            "clientInfo": {"name": "mcpgate-conformance-client", "version": "1"},
        });
        let reply = self.client.legacy_with(&self.url, &self.auth_headers(), "initialize", init, None).await?;
        ensure!(reply.status == 200, "initialize: HTTP {}: {}", reply.status, reply.body);
        self.id = Some(reply.session.clone().with_context(|| format!("no session id: {}", reply.body))?);
        self.client
            .post(
                &self.url,
                &self.legacy_headers(),
                json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
            )
            .await?;
        Ok(())
    }

    /// Every page of a list.
    pub(super) async fn list(&self, method: &str, member: &str) -> anyhow::Result<Vec<Value>> {
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
    async fn request(&self, method: &str, params: Value, extra: &[(&str, &str)]) -> anyhow::Result<Value> {
        let (status, message) = self.message(method, params, extra).await?;
        if let Some(error) = message.get("error") {
            bail!("{method}: HTTP {status}: {error}");
        }
        message.get("result").cloned().with_context(|| format!("{method}: no result: {message}"))
    }

    /// One request in the session's era; the HTTP status and the JSON-RPC response.
    pub(super) async fn message(
        &self,
        method: &str,
        mut params: Value,
        extra: &[(&str, &str)],
    ) -> anyhow::Result<(u16, Value)> {
        let mut headers = self.auth_headers();
        headers.extend_from_slice(extra);
        let reply = if self.modern {
            let mut caps = json!({"elicitation": self.elicitation(), "sampling": {}, "roots": {}});
            caps["extensions"] = json!({ TASKS: {} });
            params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": caps});
            self.client.modern_with(&self.url, &headers, method, params).await?
        } else {
            self.client.legacy_with(&self.url, &headers, method, params, self.id.as_deref()).await?
        };
        let message = last_message(&reply).with_context(|| format!("{method}: HTTP {}", reply.status))?;
        Ok((reply.status, message))
    }

    /// The headers of the session's POSTs that are not requests (a notification, responses).
    fn legacy_headers(&self) -> Vec<(&str, &str)> {
        let mut headers = self.auth_headers();
        if let Some(id) = &self.id {
            headers.extend([
                (MCP_SESSION_ID, id.as_str()),
                (MCP_PROTOCOL_VERSION, ProtocolVersion::LATEST_LEGACY.as_str()),
            ]);
        }
        headers
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
