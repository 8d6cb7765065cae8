//! Per-user upstream tokens by OAuth 2.0 Token Exchange (RFC 8693), through nginx in front of
//! three replicas with JWT auth: a real FastMCP upstream configured with
//! `[upstream.token_exchange]` receives each caller's exchanged token and never a caller's
//! JWT (on any request, list reads included); a replica exchanges a caller's token once and
//! reuses it; another caller gets another token; a caller whose token the authorization server
//! refuses gets a tool error naming the token exchange, and the upstream is not called.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;

use mcpgate_e2e::{Client, Cluster, HttpServer, TaskPoll, Until, next_request};

const CLIENT_ID: &str = "mcpgate";
const CLIENT_SECRET: &str = "tx-s3cret";
/// `Basic base64("mcpgate:tx-s3cret")`.
const BASIC: &str = "Basic bWNwZ2F0ZTp0eC1zM2NyZXQ=";
const ACCESS_TOKEN: &str = "urn:ietf:params:oauth:token-type:access_token";

/// What the stand-in token endpoint saw.
#[derive(Default)]
struct Seen {
    /// Exchanges per subject (the `sub` the test minted the caller's JWT for).
    exchanges: HashMap<String, u32>,
    /// Requests that broke the protocol (wrong client auth, grant, token type, audience).
    problems: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

fn lock(seen: &Shared) -> std::sync::MutexGuard<'_, Seen> {
    seen.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Decodes an `application/x-www-form-urlencoded` body.
fn form(body: &str) -> HashMap<String, String> {
    let decode = |s: &str| {
        let bytes = s.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'+' => out.push(b' '),
                b'%' if i + 2 < bytes.len() => {
                    let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("00");
                    out.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                    i += 2;
                }
                b => out.push(b),
            }
            i += 1;
        }
        String::from_utf8_lossy(&out).into_owned()
    };
    body.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

/// A stand-in RFC 8693 token endpoint on loopback: it knows the callers' JWTs (`subjects`:
/// token → sub), checks every request, refuses `mallory` with `invalid_grant`, and issues
/// `exchanged-<n>-<sub>` otherwise.
async fn token_endpoint(subjects: HashMap<String, String>) -> anyhow::Result<(String, Shared)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/oauth/token", listener.local_addr()?);
    let seen: Shared = Arc::default();
    let state = seen.clone();
    let subjects = Arc::new(subjects);
    tokio::spawn(async move {
        let mut issued = 0u32;
        while let Ok((mut socket, _)) = listener.accept().await {
            let (state, subjects) = (state.clone(), subjects.clone());
            issued += 1000;
            let base = issued;
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                let mut served = 0;
                while let Some(request) = next_request(&mut socket, &mut buffer, Duration::from_secs(10)).await {
                    let head = &request.head;
                    let header = |name: &str| request.header(name);
                    let body = String::from_utf8_lossy(&request.body).to_string();
                    served += 1;
                    let fields = form(&body);
                    let field = |k: &str| fields.get(k).map(String::as_str);
                    let mut problems = Vec::new();
                    if !head.starts_with("POST /oauth/token ") {
                        problems.push(format!("request line {:?}", head.lines().next()));
                    }
                    if header("authorization").as_deref() != Some(BASIC) {
                        problems.push("client authentication is not HTTP Basic with the client's id and secret".into());
                    }
                    if !header("content-type").is_some_and(|v| v.starts_with("application/x-www-form-urlencoded")) {
                        problems.push(format!("content-type {:?}", header("content-type")));
                    }
                    for (key, want) in [
                        ("grant_type", "urn:ietf:params:oauth:grant-type:token-exchange"),
                        ("subject_token_type", ACCESS_TOKEN),
                        ("requested_token_type", ACCESS_TOKEN),
                        ("audience", "fm-audience"),
                        ("scope", "whoami read"),
                    ] {
                        if field(key) != Some(want) {
                            problems.push(format!("{key} = {:?}", field(key)));
                        }
                    }
                    if fields.contains_key("client_secret") {
                        problems.push("the client secret in the body".into());
                    }
                    let sub = field("subject_token").and_then(|t| subjects.get(t)).cloned();
                    let (status, answer) = match (&sub, problems.is_empty()) {
                        (None, _) => {
                            problems.push("subject_token is not a caller's JWT".into());
                            (400, json!({"error": "invalid_request"}))
                        }
                        (Some(_), false) => (400, json!({"error": "invalid_request"})),
                        (Some(sub), true) if sub == "mallory" => {
                            (400, json!({"error": "invalid_grant", "error_description": "mallory may not use fm"}))
                        }
                        (Some(sub), true) => {
                            let mut seen = lock(&state);
                            let n = seen.exchanges.entry(sub.clone()).or_default();
                            *n += 1;
                            let token = format!("exchanged-{}-{sub}", base + served);
                            (
                                200,
                                json!({"access_token": token, "issued_token_type": ACCESS_TOKEN,
                                    "token_type": "Bearer", "expires_in": 300}),
                            )
                        }
                    };
                    lock(&state).problems.extend(problems);
                    let body = answer.to_string();
                    let reason = if status == 200 { "OK" } else { "Bad Request" };
                    let response = format!(
                        "HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\ncache-control: no-store\r\n\
                         content-length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((url, seen))
}

/// The `Authorization` values the upstream received, by method (its request log).
fn upstream_saw(markers: &std::path::Path) -> Vec<(String, String)> {
    std::fs::read_to_string(markers.join("requests.log"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_once('\t').map(|(m, a)| (m.to_owned(), a.to_owned())))
        .collect()
}

async fn whoami(client: &Client, url: &str, authorization: &str) -> anyhow::Result<Value> {
    let params = json!({"name": "fm_whoami", "arguments": {}});
    let reply = client.modern_with(url, &[("authorization", authorization)], "tools/call", params).await?;
    anyhow::ensure!(reply.status == 200, "{}: {}", reply.status, reply.body);
    Ok(reply.json()?["result"].clone())
}

fn text(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_exchange_upstream_receives_exchanged_tokens_never_the_callers() -> anyhow::Result<()> {
    let callers: Vec<(&str, String)> = ["alice", "bob", "mallory"]
        .into_iter()
        .map(|sub| Ok((sub, crate::jwt::bearer(sub)?)))
        .collect::<anyhow::Result<_>>()?;
    let jwt = |sub: &str| callers.iter().find(|(s, _)| *s == sub).map(|(_, b)| b.clone()).unwrap_or_default();
    let subjects = callers
        .iter()
        .map(|(sub, bearer)| (bearer.trim_start_matches("Bearer ").to_owned(), (*sub).to_owned()))
        .collect();
    let (token_url, seen) = token_endpoint(subjects).await?;

    let dir = tempfile::tempdir()?;
    let fm = HttpServer::fastmcp_script("fastmcp_whoami_server.py", dir.path())?;
    let config = dir.path().join("mcpgate.toml");
    std::fs::write(
        &config,
        format!(
            "[[upstream]]\nname = \"fm\"\ntransport = \"http\"\nurl = \"{}\"\n\
             [upstream.token_exchange]\ntoken_url = \"{token_url}\"\nclient_id = \"{CLIENT_ID}\"\n\
             client_secret = \"${{FM_CLIENT_SECRET}}\"\naudience = \"fm-audience\"\nscope = \"whoami read\"\n\
             [upstream.tool_task]\nwhoami = \"optional\"\n",
            fm.url()
        ),
    )?;
    // Replica 0 runs no tasks: a task created there is run by another replica's worker.
    let mut cluster = crate::jwt::with_jwt(Cluster::builder(3))
        .env("FM_CLIENT_SECRET", CLIENT_SECRET)
        .replica_env(0, "MCPGATE_TASKS_MAX_RUNNING", "0")
        .args(&["--config", &config.to_string_lossy()])
        .start()?;
    let client = Client::new()?;
    let lb = cluster.url();

    // The tool is listed (lists are read without any caller's token).
    let list = client.modern_with(&lb, &[("authorization", &jwt("alice"))], "tools/list", json!({})).await?;
    anyhow::ensure!(list.body.contains("fm_whoami"), "{}", list.body);

    // Alice, six times through the balancer: the upstream sees her exchanged token, and each
    // replica exchanges her token at most once.
    let mut alices = Vec::new();
    for i in 0..6 {
        let result = whoami(&client, &lb, &jwt("alice")).await?;
        anyhow::ensure!(result["isError"] != true, "call {i}: {result}");
        alices.push(text(&result));
    }
    for seen in &alices {
        anyhow::ensure!(seen.starts_with("Bearer exchanged-") && seen.ends_with("-alice"), "upstream saw {seen}");
    }
    let alice_exchanges = lock(&seen).exchanges.get("alice").copied().unwrap_or(0);
    anyhow::ensure!((1..=3).contains(&alice_exchanges), "alice's token exchanged {alice_exchanges} times for 6 calls");

    // Bob, twice on one replica: one exchange, and a token other than alice's.
    let one = cluster.replica_url(0);
    let first = text(&whoami(&client, &one, &jwt("bob")).await?);
    let second = text(&whoami(&client, &one, &jwt("bob")).await?);
    anyhow::ensure!(first.starts_with("Bearer exchanged-") && first.ends_with("-bob"), "upstream saw {first}");
    anyhow::ensure!(first == second, "the cached token is reused: {first} then {second}");
    anyhow::ensure!(!alices.contains(&first), "bob got one of alice's tokens: {first}");
    anyhow::ensure!(lock(&seen).exchanges.get("bob") == Some(&1), "bob's exchanges: {:?}", lock(&seen).exchanges);

    // Mallory is refused by the authorization server: a tool error naming the token exchange,
    // and the upstream is not called.
    let calls_before = upstream_saw(dir.path()).iter().filter(|(m, _)| m == "tools/call").count();
    let refused = whoami(&client, &lb, &jwt("mallory")).await?;
    anyhow::ensure!(refused["isError"] == true, "{refused}");
    let message = text(&refused);
    anyhow::ensure!(
        message.contains("token exchange") && message.contains("invalid_grant") && message.contains("fm"),
        "{message}"
    );
    let calls_after = upstream_saw(dir.path()).iter().filter(|(m, _)| m == "tools/call").count();
    anyhow::ensure!(calls_after == calls_before, "the upstream was called for mallory");

    // Whatever reached the upstream: never a caller's JWT; each tools/call with an exchanged
    // token; the gateway's own requests (discovery, lists) with no Authorization at all.
    let requests = upstream_saw(dir.path());
    anyhow::ensure!(requests.iter().filter(|(m, _)| m == "tools/call").count() == 8, "{requests:?}");
    for (method, authorization) in &requests {
        for (sub, bearer) in &callers {
            let token = bearer.trim_start_matches("Bearer ");
            anyhow::ensure!(!authorization.contains(token), "{method} carried {sub}'s JWT upstream");
        }
        match method.as_str() {
            "tools/call" => {
                anyhow::ensure!(authorization.starts_with("Bearer exchanged-"), "{method}: {authorization}")
            }
            _ => anyhow::ensure!(authorization == "-", "{method} carried {authorization}"),
        }
    }
    let problems = lock(&seen).problems.clone();
    anyhow::ensure!(problems.is_empty(), "the token endpoint saw bad requests: {problems:?}");

    // Each replica counts its exchanges, cache hits and refusals.
    let (mut exchanges, mut hits, mut refusals) = (0.0, 0.0, 0.0);
    for i in 0..3 {
        let (_, metrics) = client.get(&format!("http://{}/metrics", cluster.replica(i).addr())).await?;
        let sum = |prefix: &str| {
            metrics
                .lines()
                .filter(|l| l.starts_with(prefix))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        exchanges += sum("mcpgate_upstream_token_exchanges_total{upstream=\"fm\"}");
        hits += sum("mcpgate_upstream_token_cache_hits_total{upstream=\"fm\"}");
        refusals += sum("mcpgate_upstream_token_exchange_failures_total{upstream=\"fm\",kind=\"refused\"}");
    }
    let issued = f64::from(lock(&seen).exchanges.values().sum::<u32>());
    anyhow::ensure!(exchanges == issued + 1.0, "exchanges counted {exchanges}, issued {issued} plus mallory's");
    anyhow::ensure!(hits == 8.0 - issued, "cache hits counted {hits} for 8 calls and {issued} exchanges");
    anyhow::ensure!(refusals == 1.0, "refusals counted {refusals}");

    // As a task created on replica 0 and run by another replica's worker: the run acts with
    // alice's token, kept sealed in the task record, and the upstream sees her exchanged one.
    let caps =
        json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}});
    let params = json!({"name": "fm_whoami", "arguments": {}, "_meta": caps});
    let auth = [("authorization", jwt("alice"))];
    let auth: Vec<(&str, &str)> = auth.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let created = client.modern_with(&one, &auth, "tools/call", params).await?.json()?;
    let id = created["result"]["taskId"].as_str().ok_or_else(|| anyhow::anyhow!("no task: {created}"))?.to_owned();
    let alice = jwt("alice");
    let done = TaskPoll::new(&client, &lb).auth(&alice).until(&id, Until::Status("completed")).await;
    let seen_by_task = text(&done["result"]);
    anyhow::ensure!(
        seen_by_task.starts_with("Bearer exchanged-") && seen_by_task.ends_with("-alice"),
        "the task's run sent {seen_by_task}: {done}"
    );
    // The token the task kept is sealed: no caller's JWT in a dump of Redis.
    let dump = crate::at_rest::dump(cluster.redis().port())?;
    anyhow::ensure!(dump.contains(&id), "the dump holds the task");
    for (sub, bearer) in &callers {
        anyhow::ensure!(!dump.contains(bearer.trim_start_matches("Bearer ")), "{sub}'s JWT is in the dump");
    }
    drop(fm);
    Ok(())
}
