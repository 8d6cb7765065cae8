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
//! `auth/*` scenarios: the scenario server is a protected upstream (`auth = "oauth"`) and mcpgate
//! the OAuth client of its authorization server on behalf of the caller. Here mcpgate runs with
//! JWT auth (this program mints the caller's token) and `[auth.browser_login] verify_user =
//! false` (the suite has no gateway issuer to sign in at: the connect link alone suffices, the
//! documented risk of that setting is no risk with one user). This program then plays that user:
//! it calls the upstream's tool (or the `<upstream>_connect` stand-in), takes the connect link
//! from the gateway's question (URL elicitation, `-32042`, or an `isError` text), opens it in a
//! browser-less user agent through the suite's auto-approving authorization server and back to
//! the gateway's callback, and calls again, opening at most `MAX_LINKS` links.
//!
//! Invariant: bounded in time (the whole run ends within `DEADLINE`) and mcpgate is killed at
//! the end whatever happens; exits non-zero when anything the client does fails (a refused
//! connection too: the suite's must-reject scenarios allow that).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use reqwest::Url;
use reqwest::header::{COOKIE, HeaderMap, LOCATION, SET_COOKIE};
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

/// mcpgate's public URL in `auth/*` runs. Never resolved: the user agent sends what is under it
/// to the gateway's loopback address, as the TLS-terminating proxy of a deployment would. https,
/// so that mcpgate offers a Client ID Metadata Document where the authorization server takes one.
const PUBLIC_URL: &str = "https://mcpgate.conformance.test";
/// The client_id auth/basic-cimd requires, byte for byte (the suite's `CIMD_CLIENT_METADATA_URL`;
/// its authorization server does not fetch the document).
const SUITE_CIMD_URL: &str = "https://conformance-test.local/client-metadata.json";
/// The caller's JWT: issuer, audience (mcpgate's resource), HS256 secret (≥ 32 bytes), subject.
const JWT_ISSUER: &str = "https://issuer.conformance.test";
const JWT_AUDIENCE: &str = "https://mcpgate.conformance.test/mcp";
const JWT_SECRET: &str = "mcpgate-conformance-client-hs256-secret";
const CALLER: &str = "conformance-user";
/// The stand-in tool an oauth upstream shows a caller who has not connected it.
const CONNECT_TOOL: &str = "up_connect";
/// Most connect links the user opens in one run: a person gives up, and auth/scope-retry-limit
/// allows at most 3 authorization requests.
const MAX_LINKS: usize = 3;
/// Most calls in one `auth/*` run (each link costs a call and a retry; lists in between).
const MAX_AUTH_ROUNDS: usize = 12;
/// Most redirects one opened link may take (gateway → authorization server → gateway).
const MAX_HOPS: usize = 10;

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
    let auth = scenario.starts_with("auth/");
    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let config = dir.path().join("mcpgate.toml");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let text = if auth {
        // A client registered beforehand belongs to one authorization server, which the
        // operator names (mcpgate sends its secret nowhere else): the suite's context says which.
        oauth_config(&url, &scenario, &context, context["issuer"].as_str())
    } else {
        upstream_config(&url, &scenario)
    };
    std::fs::write(&config, text)?;
    let gateway = Gateway::builder().args(&["--config", &config.to_string_lossy()]).start()?;
    let mut session = Session {
        client: Client::new()?,
        url: gateway.url(),
        modern: version == MODERN,
        id: None,
        bearer: None,
        url_elicitation: auth,
    };
    let outcome = runtime.block_on(async {
        let run = async {
            if !auth {
                return session.exercise(&context).await;
            }
            session.bearer = Some(caller_bearer()?);
            let mut browser = Browser::new(gateway.addr())?;
            session.initialize().await?;
            session.connect_and_call(&mut browser).await
        };
        tokio::time::timeout(DEADLINE, run).await.unwrap_or_else(|_| bail!("not done within {DEADLINE:?}"))
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

/// mcpgate's config for an `auth/*` scenario: JWT auth for its callers, the public URL its
/// links and callback live under, and the scenario server as an `auth = "oauth"` upstream
/// (with the suite's pre-registered client where the scenario gives one).
fn oauth_config(url: &str, scenario: &str, context: &Value, issuer: Option<&str>) -> String {
    let mut server = format!("[server]\npublic_url = {PUBLIC_URL:?}\n");
    if scenario == "auth/basic-cimd" {
        server.push_str(&format!("client_metadata_url = {SUITE_CIMD_URL:?}\n"));
    }
    let mut upstream =
        format!("[[upstream]]\nname = \"{UPSTREAM}\"\ntransport = \"http\"\nurl = {url:?}\nauth = \"oauth\"\n");
    if let (Some(id), Some(secret)) = (context["client_id"].as_str(), context["client_secret"].as_str()) {
        upstream.push_str(&format!("\n[upstream.oauth]\nclient_id = {id:?}\nclient_secret = {secret:?}\n"));
        if let Some(issuer) = issuer {
            upstream.push_str(&format!("issuer = {issuer:?}\n"));
        }
    }
    format!(
        "{server}\n[auth]\nmode = \"jwt\"\nresource = {JWT_AUDIENCE:?}\nauthorization_servers = [{JWT_ISSUER:?}]\n\n\
         [auth.jwt]\nissuer = {JWT_ISSUER:?}\nalgorithms = [\"HS256\"]\nhs256_secrets = [{JWT_SECRET:?}]\n\n\
         [auth.browser_login]\nverify_user = false\n\n[federation]\nstartup_wait_secs = 5\n\n{upstream}"
    )
}

/// The caller's `Authorization` header value: an HS256 JWT mcpgate accepts, valid ten minutes.
fn caller_bearer() -> anyhow::Result<String> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_secs();
    let claims = json!({"iss": JWT_ISSUER, "aud": JWT_AUDIENCE, "sub": CALLER, "iat": now, "exp": now + 600});
    let token = encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(JWT_SECRET.as_bytes()))?;
    Ok(format!("Bearer {token}"))
}

/// A client of mcpgate, in one era.
struct Session {
    client: Client,
    url: String,
    modern: bool,
    /// The legacy session id.
    id: Option<String>,
    /// The caller's `Authorization` (auth/* runs: mcpgate then requires a JWT).
    bearer: Option<String>,
    /// Whether the client declares URL elicitation (auth/* runs: so the gateway asks for a
    /// connection by URL elicitation, or -32042 in a 2025-11-25 session).
    url_elicitation: bool,
}

impl Session {
    async fn exercise(mut self, context: &Value) -> anyhow::Result<()> {
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
    async fn initialize(&mut self) -> anyhow::Result<()> {
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

    /// Plays the user of an `auth = "oauth"` upstream until its own tool answers: calls it (or
    /// the connect stand-in while the list has nothing else), opens each link the gateway asks
    /// to open, retries. Ends with an error when a link is refused or asked for too often.
    async fn connect_and_call(&self, browser: &mut Browser) -> anyhow::Result<()> {
        let mut opened = 0;
        let mut retry: Option<Value> = None;
        for _ in 0..MAX_AUTH_ROUNDS {
            let params = match retry.take() {
                Some(params) => params,
                None => {
                    let tools = self.list("tools/list", "tools").await?;
                    let tool = pick_tool(&tools)?;
                    json!({"name": tool["name"], "arguments": sample(&tool["inputSchema"])})
                }
            };
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            let (status, message) = self.message("tools/call", params.clone(), &[]).await?;
            if let Some(ask) = connect_request(&message, &params) {
                ensure!(opened < MAX_LINKS, "asked to connect {name} again after {MAX_LINKS} links: giving up");
                opened += 1;
                #[allow(clippy::print_stderr, reason = "the suite keeps the client's stderr")]
                {
                    eprintln!("{name}: asked to connect; opening link {opened}");
                }
                browser.open(&ask.url).await.with_context(|| format!("opening connect link {opened}"))?;
                retry = Some(ask.retry);
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("tools/call {name}: HTTP {status}: {error}");
            }
            let result = &message["result"];
            #[allow(clippy::print_stderr, reason = "the suite keeps the client's stderr")]
            {
                eprintln!("{name}: {result}");
            }
            if result["resultType"] == "input_required" {
                let mut next = params;
                next["inputResponses"] = answers(&result["inputRequests"]);
                match result.get("requestState") {
                    Some(state) => next["requestState"] = state.clone(),
                    None => _ = next.as_object_mut().map(|p| p.remove("requestState")),
                }
                retry = Some(next);
                continue;
            }
            ensure!(result["isError"] != json!(true), "{name} failed: {result}");
            if name != CONNECT_TOOL {
                return Ok(());
            }
            // The stand-in says the upstream is connected: its own tools are listed now.
        }
        bail!("the upstream's own tool did not answer within {MAX_AUTH_ROUNDS} calls")
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
    async fn request(&self, method: &str, params: Value, extra: &[(&str, &str)]) -> anyhow::Result<Value> {
        let (status, message) = self.message(method, params, extra).await?;
        if let Some(error) = message.get("error") {
            bail!("{method}: HTTP {status}: {error}");
        }
        message.get("result").cloned().with_context(|| format!("{method}: no result: {message}"))
    }

    /// One request in the session's era; the HTTP status and the JSON-RPC response.
    async fn message(&self, method: &str, mut params: Value, extra: &[(&str, &str)]) -> anyhow::Result<(u16, Value)> {
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

/// The tool an `auth/*` run calls: the upstream's own (listed once connected), else the
/// connect stand-in.
fn pick_tool(tools: &[Value]) -> anyhow::Result<&Value> {
    let upstream = |t: &&Value| t["name"].as_str().is_some_and(|n| n.starts_with(PREFIX));
    tools
        .iter()
        .filter(upstream)
        .find(|t| t["name"] != CONNECT_TOOL)
        .or_else(|| tools.iter().find(|t| t["name"] == CONNECT_TOOL))
        .with_context(|| format!("neither the upstream's tools nor {CONNECT_TOOL} listed: {tools:?}"))
}

/// The gateway asking the user to connect: the link, and the call to make once it is opened.
struct ConnectRequest {
    url: String,
    retry: Value,
}

/// Whether `message` (the answer to tools/call with `params`) asks the user to open a connect
/// link, in any of the three ways mcpgate asks: a URL elicitation (2026-07-28 `input_required`;
/// the retry accepts it and carries the `requestState`), error `-32042` with
/// `data.elicitations` (2025-11-25; the retry is the same call), or an `isError` result whose
/// text holds the link (a client without URL elicitation; the retry is the same call).
fn connect_request(message: &Value, params: &Value) -> Option<ConnectRequest> {
    if message["error"]["code"] == json!(-32042) {
        let elicitations = message["error"]["data"]["elicitations"].as_array()?;
        let url = elicitations.iter().find(|e| e["mode"] == "url")?["url"].as_str()?;
        return Some(ConnectRequest { url: url.to_owned(), retry: params.clone() });
    }
    let result = &message["result"];
    if result["resultType"] == "input_required" {
        let requests = result["inputRequests"].as_object()?;
        let (key, url) = requests.iter().find_map(|(key, request)| {
            let asked = &request["params"];
            (request["method"] == "elicitation/create" && asked["mode"] == "url")
                .then(|| Some((key.clone(), asked["url"].as_str()?.to_owned())))
                .flatten()
        })?;
        let mut responses = answers(&result["inputRequests"]);
        responses[key.as_str()] = json!({"action": "accept"});
        let mut retry = params.clone();
        retry["inputResponses"] = responses;
        match result.get("requestState") {
            Some(state) => retry["requestState"] = state.clone(),
            None => _ = retry.as_object_mut().map(|p| p.remove("requestState")),
        }
        return Some(ConnectRequest { url, retry });
    }
    if result["isError"] == json!(true) {
        let texts = result["content"].as_array()?.iter().filter_map(|c| c["text"].as_str());
        let url = texts.into_iter().find_map(link_in)?;
        return Some(ConnectRequest { url, retry: params.clone() });
    }
    None
}

/// The connect link in a text meant for a person (up to whitespace or a closing quote or
/// bracket, without trailing punctuation).
fn link_in(text: &str) -> Option<String> {
    let start = text.find(&format!("{PUBLIC_URL}/oauth/connect/"))?;
    let rest = &text[start..];
    let end =
        rest.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']')).unwrap_or(rest.len());
    Some(rest[..end].trim_end_matches(['.', ',', ';', ':']).to_owned())
}

/// The user's browser, without one: follows redirects by hand, sends what is under
/// `PUBLIC_URL` to the gateway's loopback address (as a TLS-terminating proxy would), keeps the
/// gateway's cookies. The suite's authorization server approves at once (no login page).
struct Browser {
    http: reqwest::Client,
    /// The gateway's `host:port`.
    gateway: String,
    /// Cookies the gateway set (name → value; attributes are not needed here).
    cookies: BTreeMap<String, String>,
}

impl Browser {
    fn new(gateway: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .context("building the user agent")?;
        Ok(Self { http, gateway: gateway.to_owned(), cookies: BTreeMap::new() })
    }

    /// Opens `link` and follows its redirects to a page; fails unless that page is a 2xx.
    async fn open(&mut self, link: &str) -> anyhow::Result<()> {
        let mut at = Url::parse(link).context("the connect link is not a URL")?;
        for _ in 0..MAX_HOPS {
            let gateway = at.as_str().strip_prefix(PUBLIC_URL).filter(|rest| rest.starts_with('/'));
            let target = gateway.map_or_else(|| at.to_string(), |rest| format!("http://{}{rest}", self.gateway));
            let mut request = self.http.get(&target);
            if gateway.is_some() && !self.cookies.is_empty() {
                let jar: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
                request = request.header(COOKIE, jar.join("; "));
            }
            // Shown without its query: it carries codes and sealed state.
            let shown = format!("{}{}", at.origin().ascii_serialization(), at.path());
            let response = request.send().await.with_context(|| format!("GET {shown}"))?;
            if gateway.is_some() {
                self.keep_cookies(response.headers());
            }
            let status = response.status();
            if status.is_redirection() {
                let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok());
                let location = location.with_context(|| format!("{shown}: HTTP {status} without a Location"))?;
                at = at.join(location).with_context(|| format!("{shown}: a Location that is not a URL"))?;
                continue;
            }
            let page: String = response.text().await.unwrap_or_default().chars().take(500).collect();
            ensure!(status.is_success(), "{shown} answered HTTP {status}: {page}");
            return Ok(());
        }
        bail!("more than {MAX_HOPS} redirects")
    }

    fn keep_cookies(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies.insert(name.trim().to_owned(), value.trim().to_owned());
            }
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

#[cfg(test)]
mod tests {
    use super::*;

    const LINK: &str = "https://mcpgate.conformance.test/oauth/connect/AbC-_12";

    fn call() -> Value {
        json!({"name": "up_test-tool", "arguments": {}})
    }

    #[test]
    fn a_legacy_url_elicitation_error_is_a_link_and_the_same_call_again() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32042, "message": "connect",
            "data": {"elicitations": [{"mode": "url", "elicitationId": "n1", "url": LINK, "message": "m"}]}}});
        let ask = connect_request(&message, &call()).expect("a link");
        assert_eq!(ask.url, LINK);
        assert_eq!(ask.retry, call());
    }

    #[test]
    fn a_modern_url_elicitation_is_accepted_on_the_retry_with_its_request_state() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
            "inputRequests": {"connect": {"method": "elicitation/create",
                "params": {"mode": "url", "url": LINK, "message": "m"}}},
            "requestState": "sealed"}});
        let ask = connect_request(&message, &call()).expect("a link");
        assert_eq!(ask.url, LINK);
        assert_eq!(ask.retry["inputResponses"], json!({"connect": {"action": "accept"}}));
        assert_eq!(ask.retry["requestState"], "sealed");
        assert_eq!(ask.retry["name"], "up_test-tool");
    }

    #[test]
    fn an_error_result_holding_the_link_is_a_link() {
        let text = format!("Connect your account: open {LINK}. Then call this tool again.");
        let message = json!({"result": {"isError": true, "content": [{"type": "text", "text": text}]}});
        assert_eq!(connect_request(&message, &call()).expect("a link").url, LINK);
    }

    #[test]
    fn answers_and_other_errors_are_no_link() {
        let answered = json!({"result": {"content": [{"type": "text", "text": "test"}]}});
        assert!(connect_request(&answered, &call()).is_none());
        let failed = json!({"result": {"isError": true, "content": [{"type": "text", "text": "no link here"}]}});
        assert!(connect_request(&failed, &call()).is_none());
        let form = json!({"result": {"resultType": "input_required", "inputRequests": {"q": {
            "method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object"}}}}}});
        assert!(connect_request(&form, &call()).is_none());
    }

    #[test]
    fn the_upstreams_own_tool_is_called_before_the_stand_in() {
        let tools = [json!({"name": CONNECT_TOOL}), json!({"name": "up_test-tool"})];
        assert_eq!(pick_tool(&tools).expect("a tool")["name"], "up_test-tool");
        assert_eq!(pick_tool(&tools[..1]).expect("a tool")["name"], CONNECT_TOOL);
        assert!(pick_tool(&[json!({"name": "other"})]).is_err());
    }

    #[test]
    fn the_pre_registered_client_and_the_cimd_url_go_where_the_scenario_needs_them() {
        let context = json!({"client_id": "pre-registered-client", "client_secret": "pre-registered-secret"});
        let config =
            oauth_config("http://localhost:1/mcp", "auth/pre-registration", &context, Some("http://localhost:2"));
        assert!(config.contains("[upstream.oauth]\nclient_id = \"pre-registered-client\""), "{config}");
        assert!(config.contains("issuer = \"http://localhost:2\""), "{config}");
        assert!(!config.contains("client_metadata_url"), "{config}");
        let config = oauth_config("http://localhost:1/mcp", "auth/basic-cimd", &Value::Null, None);
        assert!(config.contains(&format!("client_metadata_url = {SUITE_CIMD_URL:?}")), "{config}");
        assert!(!config.contains("[upstream.oauth]"), "{config}");
    }
}
