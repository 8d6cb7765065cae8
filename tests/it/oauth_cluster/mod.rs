//! Issue 28's "done means", end to end: nginx in front of three replicas sharing Redis, an
//! `auth = "oauth"` upstream (the FastMCP server that accepts only `oidc-provider`'s JWTs for
//! it and answers `whoami` with the token's `sub`), and `oidc-provider` as both the gateway's
//! issuer (callers' JWTs checked by `jwks_url`, the browser sign-in) and the upstream's
//! authorization server. Connect links come from tool calls, in each client's era: URL
//! elicitation (`input_required`) for a 2026-07-28 client declaring it, `-32042` for a
//! 2025-11-25 one, a tool error holding the link for any other. Each link is opened on one
//! replica and its sign-in and authorization come back on others; each user's calls reach the
//! upstream with that user's token; B opening A's link is refused with nothing stored; replays
//! are refused; an expired token is refreshed once, even when two replicas race for it; a task
//! created before expiry completes on another replica after it; a revoked or deleted
//! connection asks again; Redis holds no token in clear.
//!
//! What `oauth_connect.rs` covers with links it mints itself (replayed sign-in state, the
//! operator's listing) is not repeated here.
//!
//! `setup` starts it all and drives a user through it; the tests are `connect` (links in each
//! era, who may open them, revocation) and `refresh` (expiry, racing replicas, a task that
//! outlives its token).

mod connect;
mod refresh;
mod setup;

use std::time::Duration;

use reqwest::header::LOCATION;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

use mcpgate_e2e::UserAgent;

use setup::{Setup, User};

/// Where browsers are sent: nothing listens there, the test (the browser) carries each
/// request to the replica it chooses.
const PUBLIC_URL: &str = "http://127.0.0.1:9";
/// The gateway's `auth.resource`, the audience of its callers' tokens.
const RESOURCE: &str = "http://127.0.0.1:9/mcp";
const LOGIN_CALLBACK: &str = "http://127.0.0.1:9/oauth/login/callback";
const CALLBACK: &str = "http://127.0.0.1:9/oauth/callback";
/// Where the callers' own client application gets its users' codes (never requested).
const APP_CALLBACK: &str = "http://127.0.0.1:9/app/callback";
const UPSTREAM: &str = "files";
const ADMIN_TOKEN: &str = "oauth-cluster-e2e-admin-token-0123456789";
const CONNECT: &str = "http://127.0.0.1:9/oauth/connect/";
/// A 2026-07-28 client declaring URL elicitation.
const URL_ELICITATION: &str = r#"{"elicitation": {"url": {}}}"#;
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// The tools `user` lists through the load balancer.
async fn tool_names(setup: &Setup, user: &User) -> anyhow::Result<Vec<String>> {
    let list = setup.modern(&setup.cluster.url(), user, "tools/list", json!({}), json!({})).await?;
    let tools = list["result"]["tools"].as_array().cloned().unwrap_or_default();
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

/// The connect link in `text`.
fn link_in(text: &str) -> anyhow::Result<String> {
    let at = text.find(CONNECT).ok_or_else(|| anyhow::anyhow!("no connect link in {text:?}"))?;
    let rest = &text[at..];
    Ok(rest[..rest.find(char::is_whitespace).unwrap_or(rest.len())].to_owned())
}

/// The one URL elicitation of an `input_required` result: its key, link and the requestState.
fn url_elicitation(reply: &Value) -> anyhow::Result<(String, String, String)> {
    let result = &reply["result"];
    anyhow::ensure!(result["resultType"] == "input_required", "{reply}");
    let requests = result["inputRequests"].as_object().ok_or_else(|| anyhow::anyhow!("{reply}"))?;
    anyhow::ensure!(requests.len() == 1, "one request: {reply}");
    let (key, request) = requests.iter().next().expect("one");
    anyhow::ensure!(request["method"] == "elicitation/create" && request["params"]["mode"] == "url", "{reply}");
    let url = request["params"]["url"].as_str().unwrap_or_default();
    anyhow::ensure!(url.starts_with(CONNECT), "{reply}");
    let state = result["requestState"].as_str().ok_or_else(|| anyhow::anyhow!("no requestState: {reply}"))?;
    Ok((key.clone(), url.to_owned(), state.to_owned()))
}

/// A GET without following redirects: status, `Location`, body.
async fn get(url: &str) -> anyhow::Result<(StatusCode, Option<String>, String)> {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let response = http.get(url).send().await?;
    let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Ok((response.status(), location, response.text().await?))
}

/// A GET in `agent` (its cookies sent and kept), without following redirects.
async fn browse(agent: &mut UserAgent, url: &str) -> anyhow::Result<(StatusCode, Option<String>, String)> {
    let (status, location, body) = agent.open(&Url::parse(url)?).await?;
    Ok((status, location.map(String::from), body))
}

/// A redirect's target, asserting it is one.
fn redirected(answer: (StatusCode, Option<String>, String), what: &str) -> anyhow::Result<Url> {
    let (status, location, body) = answer;
    anyhow::ensure!(status == StatusCode::FOUND, "{what}: {status} {body}");
    Ok(Url::parse(&location.ok_or_else(|| anyhow::anyhow!("{what}: no Location"))?)?)
}

/// The commands on store locks (keys `<prefix>:lock:…`) that Redis is sent, seen through
/// `MONITOR` from its start: while a refresh is held at the token endpoint, the only lock
/// commands are attempts to take the refresh lock (its release comes after the refresh).
struct LockAttempts {
    lines: tokio::io::Lines<tokio::io::BufReader<tokio::net::TcpStream>>,
    seen: usize,
}

impl LockAttempts {
    async fn start(port: u16) -> anyhow::Result<Self> {
        use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(b"MONITOR\r\n").await?;
        let mut lines = tokio::io::BufReader::new(stream).lines();
        let ok = lines.next_line().await?.unwrap_or_default();
        anyhow::ensure!(ok == "+OK", "MONITOR answered {ok:?}");
        Ok(Self { lines, seen: 0 })
    }

    /// How many were seen so far (reading what MONITOR sent, for at most 200 ms).
    async fn count(&mut self) -> anyhow::Result<usize> {
        let until = tokio::time::Instant::now() + Duration::from_millis(200);
        // `next_line` is cancel-safe: a line cut by the timeout is read whole next time.
        while let Ok(line) = tokio::time::timeout_at(until, self.lines.next_line()).await {
            let line = line?.ok_or_else(|| anyhow::anyhow!("Redis closed the MONITOR connection"))?;
            // Commands a script runs are shown too ("[0 lua]"): only what a replica sent counts.
            if line.contains(":lock:") && !line.contains(" lua]") {
                self.seen += 1;
            }
        }
        Ok(self.seen)
    }
}

fn now_ms() -> u64 {
    u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()))
        .unwrap_or(u64::MAX)
}

/// `Principal::key()` of (`issuer`, `sub`).
fn principal_key(issuer: &str, sub: &str) -> String {
    format!("{}:{issuer}{sub}", issuer.len())
}
