//! The cluster of these tests (nginx, three replicas, Redis, `oidc-provider` and the
//! FastMCP upstream), the callers' client application, and the steps a user takes in it:
//! sign in, call, open a link, connect.

use std::io::Write as _;
use std::time::Duration;

use reqwest::{Method, StatusCode, Url};
use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, OAuthServers, PATIENCE, UserAgent, run_to_end, wait_for};
use mcpgate_upstream::oauth::{ClientRegistration, OAuthClient, Pkce, ServerMetadata, authorization_url};

use super::{
    ADMIN_TOKEN, APP_CALLBACK, CALLBACK, LOGIN_CALLBACK, PUBLIC_URL, RESOURCE, UPSTREAM, browse, link_in, now_ms,
    redirected, text,
};

pub(super) struct Setup {
    pub(super) servers: OAuthServers,
    pub(super) cluster: Cluster,
    pub(super) app: CallerApp,
    pub(super) client: Client,
    pub(super) _config: tempfile::NamedTempFile,
}

/// The client application callers use to get their tokens from the gateway's issuer (a
/// public client with PKCE, for the gateway's audience).
pub(super) struct CallerApp {
    pub(super) oauth: OAuthClient,
    pub(super) server: ServerMetadata,
    pub(super) registration: ClientRegistration,
}

/// A user: their browser (its session at the issuer) and their bearer for the gateway.
pub(super) struct User {
    pub(super) login: &'static str,
    pub(super) agent: UserAgent,
    pub(super) bearer: String,
}

impl Setup {
    /// Everything, upstream access tokens living `token_ttl`.
    pub(super) async fn start(token_ttl: Duration) -> anyhow::Result<Self> {
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
    pub(super) async fn user(&self, login: &'static str) -> anyhow::Result<User> {
        let mut agent = UserAgent::new()?;
        let bearer = self.app.token(&mut agent, login).await?;
        Ok(User { login, agent, bearer })
    }

    /// `url` (under the public URL) as requested of replica `i`.
    pub(super) fn on(&self, i: usize, url: &str) -> anyhow::Result<String> {
        let rest = url.strip_prefix(PUBLIC_URL).ok_or_else(|| anyhow::anyhow!("{url} is not under {PUBLIC_URL}"))?;
        Ok(format!("{}{rest}", self.cluster.replica_url(i).trim_end_matches("/mcp")))
    }

    /// A 2026-07-28 request of `user` to `url` with client capabilities `caps`: the reply.
    pub(super) async fn modern(
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
    pub(super) async fn call(&self, user: &User, tool: &str, at: Option<usize>) -> anyhow::Result<Value> {
        let url = at.map_or_else(|| self.cluster.url(), |i| self.cluster.replica_url(i));
        let reply = self.modern(&url, user, "tools/call", json!({}), json!({"name": tool, "arguments": {}})).await?;
        anyhow::ensure!(reply.get("result").is_some(), "{} calling {tool}: {reply}", user.login);
        Ok(reply["result"].clone())
    }

    /// What `whoami` answers `user` (through the load balancer, or replica `at`), failing on
    /// anything but a plain tool result.
    pub(super) async fn whoami(&self, user: &User, at: Option<usize>) -> anyhow::Result<String> {
        let result = self.call(user, "files_whoami", at).await?;
        anyhow::ensure!(result["isError"] != true && result["resultType"] != "input_required", "{result}");
        Ok(text(&result))
    }

    /// The link in the tool error a client without URL elicitation gets.
    pub(super) async fn link_in_tool_error(&self, user: &User) -> anyhow::Result<String> {
        let result = self.call(user, "files_whoami", None).await?;
        anyhow::ensure!(result["isError"] == true, "{} is asked to connect: {result}", user.login);
        let said = text(&result);
        anyhow::ensure!(said.contains("call this tool again"), "{said}");
        link_in(&said)
    }

    /// The user opens `link` on replica `at.0`; the sign-in comes back to `at.1` and the
    /// authorization to `at.2`. The last page's status and text, and the authorization's
    /// return (to replay); or the refusal of the sign-in's return.
    pub(super) async fn connect(
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
    pub(super) async fn connected(
        &self,
        user: &mut User,
        link: &str,
        at: (usize, usize, usize),
    ) -> anyhow::Result<String> {
        let (status, page, done) = self.connect(user, link, at).await?;
        anyhow::ensure!(status == StatusCode::OK && page.contains("connected"), "{status} {page}\n{}", self.logs());
        done.ok_or_else(|| anyhow::anyhow!("no authorization return"))
    }

    /// `mcpgate admin credentials <args>` against replica 0.
    pub(super) fn admin(&self, args: &[&str]) -> anyhow::Result<Value> {
        let admin = format!("http://{}", self.cluster.replica(0).admin_addr().expect("an admin listener"));
        let args = [&["admin", "--url", &admin, "credentials"], args].concat();
        let (status, out, err) = run_to_end(&args, &[("MCPGATE_ADMIN_TOKEN", ADMIN_TOKEN)])?;
        anyhow::ensure!(status.success(), "mcpgate {args:?}: {err}");
        Ok(serde_json::from_str(&out)?)
    }

    /// The connections listed (metadata), by subject.
    pub(super) fn connections(&self) -> anyhow::Result<Vec<Value>> {
        Ok(self.admin(&["list"])?["credentials"].as_array().cloned().unwrap_or_default())
    }

    /// When `sub`'s access token expires (Unix ms), from the operator's listing.
    pub(super) fn expires_at(&self, sub: &str) -> anyhow::Result<u64> {
        let listed = self.connections()?;
        let entry = listed.iter().find(|c| c["subject"] == sub).ok_or_else(|| anyhow::anyhow!("{sub}: {listed:?}"))?;
        entry["expiresAt"].as_u64().ok_or_else(|| anyhow::anyhow!("no expiresAt: {entry}"))
    }

    /// Waits (bounded) until `sub`'s access token has expired: the one the listing shows once
    /// the one it showed before has expired (a replica may have refreshed it meanwhile).
    pub(super) async fn until_expired(&self, sub: &str) -> anyhow::Result<()> {
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
    pub(super) async fn token_endpoint(&self, method: Method, what: &str) -> anyhow::Result<Value> {
        let url = format!("{}/test/{what}", self.servers.issuer());
        let answer = reqwest::Client::new().request(method, &url).send().await?;
        let status = answer.status();
        let body = answer.text().await?;
        anyhow::ensure!(status.is_success(), "{url}: {status} {body}");
        Ok(serde_json::from_str(&body)?)
    }

    /// Refreshes (`outcome` ok or failed) the replicas `among` counted.
    pub(super) async fn refreshes(&self, among: &[usize], outcome: &str) -> anyhow::Result<u64> {
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

    pub(super) fn logs(&self) -> String {
        let replicas: Vec<String> = self.cluster.replicas.iter().flatten().map(|g| g.logs()).collect();
        format!("{}\n{}", self.servers.logs(), replicas.join("\n"))
    }

    pub(super) fn redis_port(&self) -> u16 {
        let env = self.cluster.env();
        let url = env.iter().find(|(k, _)| k == "MCPGATE_REDIS_URL").map(|(_, v)| v.as_str()).unwrap_or_default();
        url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or_default()
    }
}

impl CallerApp {
    /// Registers the application at the issuer (found as the upstream names it: the same
    /// `oidc-provider`).
    pub(super) async fn register(servers: &OAuthServers) -> anyhow::Result<Self> {
        let oauth = OAuthClient::new(Duration::from_secs(30))?;
        let endpoint = Url::parse(servers.endpoint())?;
        let challenge = oauth.challenge(&endpoint).await?;
        let server = oauth.discover(&endpoint, challenge.as_ref()).await?.server;
        let registration = oauth.register(&server, "e2e-caller-app", APP_CALLBACK).await?;
        Ok(Self { oauth, server, registration })
    }

    /// `login`'s bearer for the gateway: signed in and consented in `agent`.
    pub(super) async fn token(&self, agent: &mut UserAgent, login: &str) -> anyhow::Result<String> {
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
