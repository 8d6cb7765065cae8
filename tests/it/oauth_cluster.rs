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

use std::io::Write as _;
use std::time::Duration;

use reqwest::header::LOCATION;
use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Look, OAuthServers, PATIENCE, TaskPoll, Until, UserAgent, run_to_end, wait_for};
use mcpgate_upstream::oauth::{ClientRegistration, OAuthClient, Pkce, ServerMetadata, authorization_url};

use crate::at_rest::dump;
use crate::oauth_connect::holds_a_jwt;

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

struct Setup {
    servers: OAuthServers,
    cluster: Cluster,
    app: CallerApp,
    client: Client,
    _config: tempfile::NamedTempFile,
}

/// The client application callers use to get their tokens from the gateway's issuer (a
/// public client with PKCE, for the gateway's audience).
struct CallerApp {
    oauth: OAuthClient,
    server: ServerMetadata,
    registration: ClientRegistration,
}

/// A user: their browser (its session at the issuer) and their bearer for the gateway.
struct User {
    login: &'static str,
    agent: UserAgent,
    bearer: String,
}

impl Setup {
    /// Everything, upstream access tokens living `token_ttl`.
    async fn start(token_ttl: Duration) -> anyhow::Result<Self> {
        let servers = OAuthServers::start_for(token_ttl, Some(RESOURCE))?;
        let (client_id, client_secret) = servers.register_client(LOGIN_CALLBACK).await?;
        let issuer = servers.issuer();
        let mut config = tempfile::NamedTempFile::new()?;
        write!(
            config,
            r#"
[server]
public_url = "{PUBLIC_URL}"
[auth]
mode = "jwt"
resource = "{RESOURCE}"
authorization_servers = ["{issuer}"]
[auth.jwt]
issuer = "{issuer}"
algorithms = ["RS256"]
jwks_url = "{issuer}/jwks"
[auth.browser_login]
client_id = "{client_id}"
client_secret = "{client_secret}"
[federation]
startup_wait_secs = 5
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[[upstream]]
name = "{UPSTREAM}"
transport = "http"
url = "{}"
auth = "oauth"
task = "optional"
"#,
            servers.endpoint()
        )?;
        let path = config.path().to_str().unwrap_or_default().to_owned();
        let cluster = Cluster::builder(3)
            // Short leases: a killed replica's task is taken over within the test.
            .env("MCPGATE_TASKS_LEASE_MS", "1500")
            .env("MCPGATE_STORE_COMMAND_TIMEOUT_MS", "750")
            .args(&["--config", &path])
            .start()?;
        let app = CallerApp::register(&servers).await?;
        Ok(Self { servers, cluster, app, client: Client::new()?, _config: config })
    }

    /// `login` signs in at the issuer (in their own browser) and gets a token for the gateway.
    async fn user(&self, login: &'static str) -> anyhow::Result<User> {
        let mut agent = UserAgent::new()?;
        let bearer = self.app.token(&mut agent, login).await?;
        Ok(User { login, agent, bearer })
    }

    /// `url` (under the public URL) as requested of replica `i`.
    fn on(&self, i: usize, url: &str) -> anyhow::Result<String> {
        let rest = url.strip_prefix(PUBLIC_URL).ok_or_else(|| anyhow::anyhow!("{url} is not under {PUBLIC_URL}"))?;
        Ok(format!("{}{rest}", self.cluster.replica_url(i).trim_end_matches("/mcp")))
    }

    /// A 2026-07-28 request of `user` to `url` with client capabilities `caps`: the reply.
    async fn modern(
        &self,
        url: &str,
        user: &User,
        method: &str,
        caps: Value,
        mut params: Value,
    ) -> anyhow::Result<Value> {
        params["_meta"] = json!({"io.modelcontextprotocol/clientCapabilities": caps});
        let auth = [("authorization", user.bearer.as_str())];
        Ok(self.client.modern_with(url, &auth, method, params).await?.json()?)
    }

    /// `user` calls `tool` (2026-07-28, no URL elicitation) through the load balancer, or
    /// replica `at`: the result.
    async fn call(&self, user: &User, tool: &str, at: Option<usize>) -> anyhow::Result<Value> {
        let url = at.map_or_else(|| self.cluster.url(), |i| self.cluster.replica_url(i));
        let reply = self.modern(&url, user, "tools/call", json!({}), json!({"name": tool, "arguments": {}})).await?;
        anyhow::ensure!(reply.get("result").is_some(), "{} calling {tool}: {reply}", user.login);
        Ok(reply["result"].clone())
    }

    /// What `whoami` answers `user` (through the load balancer, or replica `at`), failing on
    /// anything but a plain tool result.
    async fn whoami(&self, user: &User, at: Option<usize>) -> anyhow::Result<String> {
        let result = self.call(user, "files_whoami", at).await?;
        anyhow::ensure!(result["isError"] != true && result["resultType"] != "input_required", "{result}");
        Ok(text(&result))
    }

    /// The link in the tool error a client without URL elicitation gets.
    async fn link_in_tool_error(&self, user: &User) -> anyhow::Result<String> {
        let result = self.call(user, "files_whoami", None).await?;
        anyhow::ensure!(result["isError"] == true, "{} is asked to connect: {result}", user.login);
        let said = text(&result);
        anyhow::ensure!(said.contains("call this tool again"), "{said}");
        link_in(&said)
    }

    /// The user opens `link` on replica `at.0`; the sign-in comes back to `at.1` and the
    /// authorization to `at.2`. The last page's status and text, and the authorization's
    /// return (to replay); or the refusal of the sign-in's return.
    async fn connect(
        &self,
        user: &mut User,
        link: &str,
        at: (usize, usize, usize),
    ) -> anyhow::Result<(StatusCode, String, Option<String>)> {
        // Every step in the user's own browser: the link's answer sets the cookie that binds
        // the flow to it, which both returns must carry.
        let sign_in = redirected(browse(&mut user.agent, &self.on(at.0, link)?).await?, "opening the link")?;
        anyhow::ensure!(sign_in.as_str().starts_with(self.servers.issuer()), "sign-in at the issuer: {sign_in}");
        let back = user.agent.authorize(&sign_in, user.login, LOGIN_CALLBACK).await?;
        let (status, location, body) = browse(&mut user.agent, &self.on(at.1, back.as_str())?).await?;
        if status != StatusCode::FOUND {
            return Ok((status, body, None));
        }
        let authorize = Url::parse(&location.unwrap_or_default())?;
        anyhow::ensure!(authorize.as_str().starts_with(self.servers.issuer()), "the upstream's AS: {authorize}");
        let done = user.agent.authorize(&authorize, user.login, CALLBACK).await?;
        let (status, _, body) = browse(&mut user.agent, &self.on(at.2, done.as_str())?).await?;
        Ok((status, body, Some(done.to_string())))
    }

    /// Connects `user` through `link`, asserting it worked.
    async fn connected(&self, user: &mut User, link: &str, at: (usize, usize, usize)) -> anyhow::Result<String> {
        let (status, page, done) = self.connect(user, link, at).await?;
        anyhow::ensure!(status == StatusCode::OK && page.contains("connected"), "{status} {page}\n{}", self.logs());
        done.ok_or_else(|| anyhow::anyhow!("no authorization return"))
    }

    /// `mcpgate admin credentials <args>` against replica 0.
    fn admin(&self, args: &[&str]) -> anyhow::Result<Value> {
        let admin = format!("http://{}", self.cluster.replica(0).admin_addr().expect("an admin listener"));
        let args = [&["admin", "--url", &admin, "credentials"], args].concat();
        let (status, out, err) = run_to_end(&args, &[("MCPGATE_ADMIN_TOKEN", ADMIN_TOKEN)])?;
        anyhow::ensure!(status.success(), "mcpgate {args:?}: {err}");
        Ok(serde_json::from_str(&out)?)
    }

    /// The connections listed (metadata), by subject.
    fn connections(&self) -> anyhow::Result<Vec<Value>> {
        Ok(self.admin(&["list"])?["credentials"].as_array().cloned().unwrap_or_default())
    }

    /// When `sub`'s access token expires (Unix ms), from the operator's listing.
    fn expires_at(&self, sub: &str) -> anyhow::Result<u64> {
        let listed = self.connections()?;
        let entry = listed.iter().find(|c| c["subject"] == sub).ok_or_else(|| anyhow::anyhow!("{sub}: {listed:?}"))?;
        entry["expiresAt"].as_u64().ok_or_else(|| anyhow::anyhow!("no expiresAt: {entry}"))
    }

    /// Waits (bounded) until `sub`'s access token has expired: the one the listing shows once
    /// the one it showed before has expired (a replica may have refreshed it meanwhile).
    async fn until_expired(&self, sub: &str) -> anyhow::Result<()> {
        loop {
            let expires_at = self.expires_at(sub)?;
            if now_ms() > expires_at + 500 {
                return Ok(());
            }
            wait_for(format!("{sub}'s access token to expire (at {expires_at})"), PATIENCE, async || {
                Ok(now_ms() > expires_at + 500)
            })
            .await;
        }
    }

    /// The authorization server's test control `what` (see tests/interop/authorization_server.mjs).
    async fn token_endpoint(&self, method: Method, what: &str) -> anyhow::Result<Value> {
        let url = format!("{}/test/{what}", self.servers.issuer());
        let answer = reqwest::Client::new().request(method, &url).send().await?;
        let status = answer.status();
        let body = answer.text().await?;
        anyhow::ensure!(status.is_success(), "{url}: {status} {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// Refreshes (`outcome` ok or failed) the replicas `among` counted.
    async fn refreshes(&self, among: &[usize], outcome: &str) -> anyhow::Result<u64> {
        let mut total = 0;
        for &i in among {
            let (_, text) = self.client.get(&format!("http://{}/metrics", self.cluster.replica(i).addr())).await?;
            let label = format!("outcome=\"{outcome}\"");
            total += text
                .lines()
                .filter(|l| l.starts_with("mcpgate_oauth_refreshes_total{") && l.contains(&label))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .map(|v| v as u64)
                .sum::<u64>();
        }
        Ok(total)
    }

    fn logs(&self) -> String {
        let replicas: Vec<String> = self.cluster.replicas.iter().flatten().map(|g| g.logs()).collect();
        format!("{}\n{}", self.servers.logs(), replicas.join("\n"))
    }

    fn redis_port(&self) -> u16 {
        let env = self.cluster.env();
        let url = env.iter().find(|(k, _)| k == "MCPGATE_REDIS_URL").map(|(_, v)| v.as_str()).unwrap_or_default();
        url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or_default()
    }
}

impl CallerApp {
    /// Registers the application at the issuer (found as the upstream names it: the same
    /// `oidc-provider`).
    async fn register(servers: &OAuthServers) -> anyhow::Result<Self> {
        let oauth = OAuthClient::new(Duration::from_secs(30))?;
        let endpoint = Url::parse(servers.endpoint())?;
        let challenge = oauth.challenge(&endpoint).await?;
        let server = oauth.discover(&endpoint, challenge.as_ref()).await?.server;
        let registration = oauth.register(&server, "e2e-caller-app", APP_CALLBACK).await?;
        Ok(Self { oauth, server, registration })
    }

    /// `login`'s bearer for the gateway: signed in and consented in `agent`.
    async fn token(&self, agent: &mut UserAgent, login: &str) -> anyhow::Result<String> {
        let pkce = Pkce::generate()?;
        let state = Pkce::generate()?.verifier;
        let client_id = &self.registration.client_id;
        let url = authorization_url(&self.server, client_id, APP_CALLBACK, &pkce, &state, Some("mcp:tools"), RESOURCE)?;
        let back = agent.authorize(&url, login, APP_CALLBACK).await?;
        let code = back.query_pairs().find(|(k, _)| k == "code").map(|(_, v)| v.into_owned());
        let code = code.ok_or_else(|| anyhow::anyhow!("no code in {back}"))?;
        let tokens = self.oauth.redeem(&self.server, &self.registration, &code, APP_CALLBACK, &pkce, RESOURCE).await?;
        Ok(format!("Bearer {}", tokens.access_token))
    }
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_connects_from_a_tool_call_in_their_era_and_each_call_carries_only_their_token() -> anyhow::Result<()>
{
    let setup = Setup::start(Duration::from_secs(300)).await?;
    let (mut alice, mut bob, mut carol) =
        (setup.user("alice").await?, setup.user("bob").await?, setup.user("carol").await?);
    let lb = setup.cluster.url();
    let url_elicitation_caps: Value = serde_json::from_str(URL_ELICITATION)?;

    // The premise of "never the caller's own bearer": the upstream refuses it (another
    // audience), so every answer below came with a token the gateway held for that user.
    let auth = [("authorization", alice.bearer.as_str())];
    let direct = setup.client.modern_with(setup.servers.endpoint(), &auth, "tools/list", json!({})).await?;
    assert_eq!(direct.status, 401, "the upstream takes only its own tokens: {}", direct.body);

    // Not connected: the stand-in only.
    assert_eq!(tool_names(&setup, &alice).await?, ["files_connect"]);

    // A 2026-07-28 client declaring URL elicitation is asked by one.
    let call = json!({"name": "files_whoami", "arguments": {}});
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), call.clone()).await?;
    let (_, alices_first, _) = url_elicitation(&asked)?;
    // Any other client: the link in a tool error.
    let bobs_link = setup.link_in_tool_error(&bob).await?;

    // Bob opens Alice's link (signing in as himself): refused, nothing stored, link spent.
    let (status, page, _) = setup.connect(&mut bob, &alices_first, (0, 1, 2)).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}\n{}", setup.logs());
    assert_eq!(setup.connections()?, Vec::<Value>::new(), "nothing stored");
    assert_eq!(get(&setup.on(2, &alices_first)?).await?.0, StatusCode::GONE, "the link was spent");

    // Alice's client retries its call through the requestState: still not connected, so a new
    // link; she opens it on replica 0, the sign-in returns to 1, the authorization to 2.
    let retry = |key: &str, state: &str| {
        let mut params = call.clone();
        params["inputResponses"] = json!({key: {"action": "accept"}});
        params["requestState"] = json!(state);
        params
    };
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), call.clone()).await?;
    let (key, link, state) = url_elicitation(&asked)?;
    let asked_again =
        setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), retry(&key, &state)).await?;
    let (key, link_again, state) = url_elicitation(&asked_again)?;
    assert_ne!(link, link_again, "a fresh link each time");
    let alices_return = setup.connected(&mut alice, &link_again, (0, 1, 2)).await?;
    let done = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), retry(&key, &state)).await?;
    assert_eq!(text(&done["result"]), "alice", "the retried call goes on: {done}\n{}", setup.logs());
    // Her list now holds the upstream's own tools, not the stand-in; Bob's still does not.
    assert_eq!(tool_names(&setup, &alice).await?, ["files_whoami", "files_slow_whoami"]);
    assert_eq!(tool_names(&setup, &bob).await?, ["files_connect"]);

    // Bob connects (link on 2, back on 0 and 1) and calls again.
    setup.connected(&mut bob, &bobs_link, (2, 0, 1)).await?;
    assert_eq!(setup.whoami(&bob, None).await?, "bob");

    // A 2025-11-25 client declaring URL elicitation gets -32042, then calls again once connected.
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}},
        "clientInfo": {"name": "e2e", "version": "1"}});
    let carols_bearer = carol.bearer.clone();
    let auth = [("authorization", carols_bearer.as_str())];
    let opened = setup.client.legacy_with(&lb, &auth, "initialize", init, None).await?;
    let session = opened.session.clone().ok_or_else(|| anyhow::anyhow!("no session: {}", opened.body))?;
    let legacy_call = async || setup.client.legacy_with(&lb, &auth, "tools/call", call.clone(), Some(&session)).await;
    let refused = legacy_call().await?.json()?;
    assert_eq!(refused["error"]["code"], -32042, "{refused}");
    let elicitation = &refused["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{refused}");
    assert!(elicitation["elicitationId"].is_string(), "{refused}");
    let carols_link = elicitation["url"].as_str().unwrap_or_default().to_owned();
    setup.connected(&mut carol, &carols_link, (1, 2, 0)).await?;
    let answered = legacy_call().await?.json()?;
    assert_eq!(text(&answered["result"]), "carol", "{answered}");

    // Each user's calls, on every replica, carry their own token and nobody else's.
    for user in [&alice, &bob, &carol] {
        for i in 0..3 {
            assert_eq!(setup.whoami(user, Some(i)).await?, user.login, "{} on replica {i}", user.login);
        }
    }

    // Replayed: a spent link and an authorization's return, on every replica.
    for i in 0..3 {
        assert_eq!(get(&setup.on(i, &link_again)?).await?.0, StatusCode::GONE, "link replayed on {i}");
        assert_eq!(get(&setup.on(i, &alices_return)?).await?.0, StatusCode::GONE, "state replayed on {i}");
    }
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "a replay changes nothing");

    // No token in clear in Redis; the metadata stays readable.
    let dump = dump(setup.redis_port())?;
    assert!(!holds_a_jwt(&dump), "a JWT in clear in the dump");
    assert!(!dump.contains("access_token") && !dump.contains("refresh_token"), "token fields in clear");
    assert!(dump.contains(setup.servers.issuer()), "the metadata stays readable");

    // Revoked by an operator: Bob is asked again (and sees the stand-in again).
    let bobs = principal_key(setup.servers.issuer(), "bob");
    assert_eq!(setup.admin(&["revoke", &bobs, UPSTREAM])?["revoked"], true);
    let again = setup.link_in_tool_error(&bob).await?;
    assert_ne!(again, bobs_link);

    // Disconnected by Alice with her own bearer: she is asked again, Carol is not.
    let url = format!("{}/oauth/connections/{UPSTREAM}", setup.cluster.replica_url(1).trim_end_matches("/mcp"));
    let http = reqwest::Client::new();
    let deleted = http.delete(&url).header("authorization", &alice.bearer).send().await?.status();
    assert_eq!(deleted, StatusCode::NO_CONTENT);
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps, call.clone()).await?;
    url_elicitation(&asked)?;
    assert_eq!(setup.whoami(&carol, None).await?, "carol");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_token_is_refreshed_once_even_when_replicas_race_and_a_task_outlives_it() -> anyhow::Result<()> {
    // Upstream tokens live 4 s (refreshed within their last second): each expiry below is
    // waited out, so the lifetime is what this test costs, four times over.
    let mut setup = Setup::start(Duration::from_secs(4)).await?;
    let mut alice = setup.user("alice").await?;
    let link = setup.link_in_tool_error(&alice).await?;
    setup.connected(&mut alice, &link, (0, 1, 2)).await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice");
    let all = [0, 1, 2];

    // Expired: the next call refreshes once.
    setup.until_expired("alice").await?;
    let before = setup.refreshes(&all, "ok").await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "ok").await? - before, 1, "one refresh for one expired token");

    // Expired again, and two replicas race on it: both calls succeed, the refresh token is
    // spent once (spending a rotated one twice would revoke the grant: see below). The token
    // endpoint holds the first refresh until the other replica is seen wanting one too (trying
    // the refresh lock, or at the token endpoint itself): the two overlap, however the machine
    // schedules them.
    setup.until_expired("alice").await?;
    let before = setup.refreshes(&all, "ok").await?;
    let mut locks = LockAttempts::start(setup.redis_port()).await?;
    setup.token_endpoint(Method::POST, "hold-tokens").await?;
    let overlap = async {
        wait_for("both racing replicas to want a refresh while one is held", PATIENCE, async || {
            let held = setup.token_endpoint(Method::GET, "held-tokens").await?["held"].as_u64().unwrap_or(0);
            let locks = locks.count().await?;
            Ok(if held >= 1 && (locks >= 2 || held >= 2) {
                Look::Done(())
            } else {
                Look::not_yet(format!("{held} held at the token endpoint, {locks} lock attempts"))
            })
        })
        .await;
        setup.token_endpoint(Method::POST, "release-tokens").await
    };
    let (one, two, released) = tokio::join!(setup.whoami(&alice, Some(1)), setup.whoami(&alice, Some(2)), overlap);
    released?;
    assert_eq!((one?, two?), ("alice".to_owned(), "alice".to_owned()), "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "ok").await? - before, 1, "one refresh for two racing replicas");

    // The grant still works: the next expiry is refreshed too.
    setup.until_expired("alice").await?;
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    assert_eq!(setup.refreshes(&all, "failed").await?, 0, "no refresh was refused");

    // A task created before expiry: its replica is killed once the token expired, and another
    // replica runs the (idempotent) call again with a refreshed token of Alice's.
    let caps = json!({"extensions": {TASKS: {}}});
    // The call runs until the test creates `release` (the 120 s are only the upstream's bound):
    // still running when its replica is killed after the token's expiry however loaded the
    // machine, and no fixed sleep for the rerun, which returns once released.
    let dir = tempfile::tempdir()?;
    let lb = setup.cluster.url();
    let mut tries = 0;
    let (id, release) = loop {
        tries += 1;
        let release = dir.path().join(format!("release-{tries}"));
        let arguments = json!({"seconds": 120, "release": release.to_str().unwrap_or_default()});
        let params = json!({"name": "files_slow_whoami", "arguments": arguments});
        let expiry = setup.expires_at("alice")?;
        let created = setup.modern(&lb, &alice, "tools/call", caps.clone(), params).await?;
        let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
        // Answered before the token's expiry: created before it.
        if now_ms() < expiry {
            break (id, release);
        }
        // The machine took longer than the token's life: this task shows nothing and is let
        // through; the next one is created on a token refreshed just before.
        anyhow::ensure!(tries < 3, "three tasks in a row were created after their token expired");
        std::fs::write(&release, b"")?;
        TaskPoll::new(&setup.client, &lb).auth(&alice.bearer).within(PATIENCE).until(&id, Until::Terminal).await;
        setup.until_expired("alice").await?;
        assert_eq!(setup.whoami(&alice, None).await?, "alice", "{}", setup.logs());
    };
    let victim = setup.cluster.executing_replica_soon(&setup.client).await?;
    setup.until_expired("alice").await?;
    let survivors: Vec<usize> = all.into_iter().filter(|&i| i != victim).collect();
    let before = setup.refreshes(&survivors, "ok").await?;
    setup.cluster.kill(victim);
    std::fs::write(&release, b"")?;
    let done = TaskPoll::new(&setup.client, &lb)
        .auth(&alice.bearer)
        .within(Duration::from_secs(60))
        .until(&id, Until::Terminal)
        .await;
    assert_eq!(done["status"], "completed", "{done}\n{}", setup.logs());
    assert_eq!(text(&done["result"]), "alice", "{done}");
    let refreshed = setup.refreshes(&survivors, "ok").await? - before;
    assert!(refreshed >= 1, "the rerun after expiry refreshed on a survivor: {refreshed}");
    Ok(())
}
