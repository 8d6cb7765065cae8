//! A protected upstream and the authorization server it trusts, as real processes for the tests
//! of mcpgate's upstream OAuth client: `oidc-provider` (npm, under Node ≥ 22) and a FastMCP
//! server accepting only its JWTs, both installed by the test command under `.cache/test-tools`;
//! a hostile upstream with its own authorization server (one Node process, no packages); plus a
//! scripted user agent that signs in and consents at the authorization server and keeps
//! the cookies a browser keeps (the gateway binds a connection's flow to the browser that
//! opened its link by one).
//!
//! Invariants: both processes are killed when their handle drops; each is ready once it answers
//! as itself (the authorization server its metadata, the protected server a 401 with a Bearer
//! challenge), never merely once a port is open; the user agent follows a bounded number of
//! steps and stops at the redirect URI, which nothing needs to serve.

use std::collections::HashMap;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};
use reqwest::header::{CONTENT_TYPE, COOKIE, LOCATION, SET_COOKIE};
use reqwest::{StatusCode, Url};

use crate::probe;
use crate::upstreams::{fastmcp_python, fixture, free_port, root};
use crate::wait::{Look, patience, wait_for_blocking};

/// How long a server may take to answer its first request (node and Python start slowly on a
/// busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Most requests one authorization takes: authorize, login page, login, resume, consent page,
/// consent, resume, with room for one more round.
const MAX_STEPS: usize = 12;

/// The directory holding the `oidc-provider` package.
fn node_modules() -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os("MCPGATE_TEST_NODE_MODULES")
        .map_or_else(|| root().join(".cache/test-tools/node_modules"), PathBuf::from);
    if !dir.join("oidc-provider/package.json").is_file() {
        bail!(
            "oidc-provider not found in {}: run scripts/test (it installs oidc-provider) or set \
             MCPGATE_TEST_NODE_MODULES",
            dir.display()
        );
    }
    Ok(dir)
}

/// The Node.js the test command installs when the system's is older than 22 (oidc-provider
/// needs 22), else the system's.
fn node() -> PathBuf {
    let installed = root().join(".cache/test-tools/node_modules/.bin/node");
    if installed.is_file() { installed } else { PathBuf::from("node") }
}

/// A process killed on drop, with what it printed in a file.
#[derive(Debug)]
struct Process {
    child: Child,
    log: PathBuf,
}

impl Process {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Not yet, having seen `seen`; or an error once the process has exited.
    fn still_starting(&mut self, name: &str, seen: Look<()>) -> anyhow::Result<Look<()>> {
        if let Some(status) = self.child.try_wait()? {
            bail!("{name} exited ({status}) before answering: {}", self.log());
        }
        Ok(match seen {
            Look::NotYet(seen) => Look::NotYet(format!("{seen}\n{}", self.log())),
            done => done,
        })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `oidc-provider` (tests/interop/authorization_server.mjs) and a FastMCP server it protects
/// (tests/interop/fastmcp_protected_server.py), on loopback.
#[derive(Debug)]
pub struct OAuthServers {
    // Fields drop in order: the protected server stops before the server whose keys it fetches.
    protected: Process,
    authorization: Process,
    issuer: String,
    endpoint: String,
    _dir: tempfile::TempDir,
}

impl OAuthServers {
    /// Starts the authorization server (access tokens living `token_ttl`) and the protected
    /// server, the only resource it issues tokens for.
    ///
    /// # Errors
    ///
    /// A tool is missing, or a server exits or does not answer within 60 s (with its log).
    pub fn start(token_ttl: Duration) -> anyhow::Result<Self> {
        Self::start_for(token_ttl, None)
    }

    /// Like [`Self::start`], the authorization server also being the issuer of a gateway's
    /// callers: it issues tokens for `gateway_resource` too (the gateway's `auth.resource`),
    /// living 10 minutes whatever `token_ttl` says.
    ///
    /// # Errors
    ///
    /// As [`Self::start`].
    pub fn start_for(token_ttl: Duration, gateway_resource: Option<&str>) -> anyhow::Result<Self> {
        Self::start_with(token_ttl, gateway_resource, true)
    }

    /// Like [`Self::start`], the authorization server neither advertising nor sending RFC 9207
    /// `iss` (as many servers do not).
    ///
    /// # Errors
    ///
    /// As [`Self::start`].
    pub fn start_without_iss(token_ttl: Duration) -> anyhow::Result<Self> {
        Self::start_with(token_ttl, None, false)
    }

    fn start_with(token_ttl: Duration, gateway_resource: Option<&str>, iss: bool) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        // The authorization server must know the resource before the resource knows its
        // issuer: the protected server's port is chosen first (bound and released).
        let port = free_port()?;
        let endpoint = format!("http://127.0.0.1:{port}/mcp");
        let (authorization, issuer) = start_authorization_server(&dir, &endpoint, gateway_resource, token_ttl, iss)?;
        let protected = start_protected_server(&dir, port, &issuer)?;
        Ok(Self { protected, authorization, issuer, endpoint, _dir: dir })
    }

    /// The authorization server's issuer, `http://127.0.0.1:<port>`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The protected server's MCP endpoint, also the resource its tokens are for.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// Registers a confidential client (`client_secret_basic`) for the authorization code
    /// grant with `redirect_uri` at the authorization server (its open dynamic registration,
    /// RFC 7591), as an operator registers the gateway for the sign-in at its own issuer;
    /// returns its id and secret.
    ///
    /// # Errors
    ///
    /// The server refuses or answers without an id and a secret.
    pub async fn register_client(&self, redirect_uri: &str) -> anyhow::Result<(String, String)> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        let body = serde_json::json!({
            "redirect_uris": [redirect_uri],
            "grant_types": ["authorization_code"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "client_secret_basic",
        });
        let response = http
            .post(format!("{}/reg", self.issuer))
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_string())
            .send()
            .await?;
        let status = response.status();
        let answer: serde_json::Value = serde_json::from_str(&response.text().await?)?;
        anyhow::ensure!(status == StatusCode::CREATED, "registration answered {status}: {answer}");
        match (answer["client_id"].as_str(), answer["client_secret"].as_str()) {
            (Some(id), Some(secret)) => Ok((id.to_owned(), secret.to_owned())),
            _ => bail!("a registration without id or secret: {answer}"),
        }
    }

    /// What both servers printed.
    pub fn logs(&self) -> String {
        format!(
            "--- authorization server\n{}\n--- protected server\n{}",
            self.authorization.log(),
            self.protected.log()
        )
    }
}

/// Starts `oidc-provider` issuing tokens for `resource` (and `gateway_resource`) only; returns
/// it and its issuer once it serves its metadata.
fn start_authorization_server(
    dir: &tempfile::TempDir,
    resource: &str,
    gateway_resource: Option<&str>,
    token_ttl: Duration,
    iss: bool,
) -> anyhow::Result<(Process, String)> {
    let log = dir.path().join("authorization_server.log");
    let mut child = Command::new(node())
        .arg(fixture("authorization_server.mjs"))
        .env("AS_NODE_MODULES", node_modules()?)
        .env("AS_NO_ISS", if iss { "0" } else { "1" })
        .env("AS_RESOURCES", resource)
        .env("AS_CALLER_RESOURCES", gateway_resource.unwrap_or_default())
        .env("AS_TOKEN_TTL", token_ttl.as_secs().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .context("starting node (Node.js ≥ 22: run scripts/test, which installs it when missing)")?;
    let stdout = child.stdout.take().context("no stdout")?;
    let mut server = Process { child, log };
    let issuer = printed_issuer(stdout, &server)?;
    let port = Url::parse(&issuer)?.port().with_context(|| format!("issuer {issuer:?} has no port"))?;
    let request = probe::get("/.well-known/oauth-authorization-server");
    let expect = format!("\"issuer\":\"{issuer}\"");
    wait_for_blocking(format!("the authorization server at {issuer} to serve its metadata"), START_TIMEOUT, || {
        server.still_starting("the authorization server", probe::answers(port, &request, &expect))
    });
    Ok((server, issuer))
}

/// Starts the FastMCP server on `port`, trusting `issuer`; returns it once it challenges a
/// request without a token.
fn start_protected_server(dir: &tempfile::TempDir, port: u16, issuer: &str) -> anyhow::Result<Process> {
    let log = dir.path().join("protected_server.log");
    let out = std::fs::File::create(&log)?;
    let child = Command::new(fastmcp_python()?)
        .arg(fixture("fastmcp_protected_server.py"))
        .args([port.to_string().as_str(), issuer])
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("starting the protected FastMCP server")?;
    let mut server = Process { child, log };
    let request = probe::initialize("/mcp");
    wait_for_blocking(format!("the protected server on port {port} to challenge for a token"), START_TIMEOUT, || {
        server.still_starting("the protected server", probe::answers(port, &request, "resource_metadata="))
    });
    Ok(server)
}

/// A hostile `oauth` upstream and its own authorization server, one Node process
/// (tests/interop/hostile_authorization_server.mjs, no packages): its authorization endpoint
/// forwards browsers to an honest server as `control` says (the mix-up), its token endpoint
/// records what reaches it, and its resource metadata names the authorization servers
/// `control` gives (SSRF through discovery).
#[derive(Debug)]
pub struct HostileOAuthServer {
    process: Process,
    issuer: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl HostileOAuthServer {
    /// Starts it; returns once it serves its authorization server metadata.
    ///
    /// # Errors
    ///
    /// Node is missing, or the server exits or does not answer within 60 s (with its log).
    pub fn start() -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("hostile_server.log");
        let mut child = Command::new(node())
            .arg(fixture("hostile_authorization_server.mjs"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .spawn()
            .context("starting node (Node.js ≥ 22: run scripts/test, which installs it when missing)")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let mut process = Process { child, log };
        let issuer = printed_issuer(stdout, &process)?;
        let port = Url::parse(&issuer)?.port().with_context(|| format!("issuer {issuer:?} has no port"))?;
        let request = probe::get("/.well-known/oauth-authorization-server");
        let expect = format!("\"issuer\":\"{issuer}\"");
        wait_for_blocking(format!("the hostile server at {issuer} to serve its metadata"), START_TIMEOUT, || {
            process.still_starting("the hostile server", probe::answers(port, &request, &expect))
        });
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder().timeout(Duration::from_secs(30)).build()?;
        Ok(Self { process, issuer, http, _dir: dir })
    }

    /// Its issuer (also its origin), `http://127.0.0.1:<port>`.
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// Its MCP endpoint (the resource it claims).
    pub fn endpoint(&self) -> String {
        format!("{}/mcp", self.issuer)
    }

    /// Sets what it does: `{"forward": {...}, "authorization_servers": [...]}` (see the script).
    ///
    /// # Errors
    ///
    /// The request fails or is refused.
    pub async fn control(&self, control: serde_json::Value) -> anyhow::Result<()> {
        let response = self.http.post(format!("{}/control", self.issuer)).body(control.to_string()).send().await?;
        anyhow::ensure!(response.status() == StatusCode::OK, "control answered {}", response.status());
        Ok(())
    }

    /// What reached it: `{"token_requests": [...form fields], "requests": [{method, path}]}`.
    ///
    /// # Errors
    ///
    /// The request fails or the answer is not JSON.
    pub async fn seen(&self) -> anyhow::Result<serde_json::Value> {
        Ok(serde_json::from_str(&self.http.get(format!("{}/seen", self.issuer)).send().await?.text().await?)?)
    }

    /// What it printed.
    pub fn logs(&self) -> String {
        format!("--- hostile server\n{}", self.process.log())
    }
}

/// The issuer a server prints as `{"issuer": ...}` on `stdout`, within [`START_TIMEOUT`].
fn printed_issuer(stdout: std::process::ChildStdout, server: &Process) -> anyhow::Result<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let issuer = serde_json::from_str::<serde_json::Value>(&line)
                .ok()
                .and_then(|v| v["issuer"].as_str().map(str::to_owned));
            if let Some(issuer) = issuer {
                let _ = tx.send(issuer);
            }
        }
    });
    rx.recv_timeout(patience(START_TIMEOUT))
        .map_err(|_| anyhow::anyhow!("the server printed no issuer within {START_TIMEOUT:?}: {}", server.log()))
}

/// A browser as far as an authorization needs one: no redirect followed on its own, cookies
/// kept per host and name as a browser keeps them (RFC 6265: a cookie goes to every port and
/// path of its host; the attributes are not checked), and sent with every request it makes.
#[derive(Debug)]
pub struct UserAgent {
    http: reqwest::Client,
    /// host → cookie name → value.
    cookies: HashMap<String, HashMap<String, String>>,
}

impl UserAgent {
    /// A user agent with no cookies (no session at the authorization server).
    ///
    /// # Errors
    ///
    /// The HTTP client cannot be built.
    pub fn new() -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(30))
            .build()
            .context("building the user agent's HTTP client")?;
        Ok(Self { http, cookies: HashMap::new() })
    }

    /// GETs `url` as this browser (its cookies sent, those set kept), without following a
    /// redirect: the status, the redirect's target (joined to `url`) and the body. This is how
    /// a user opens a connect link and how their browser comes back to the gateway.
    ///
    /// # Errors
    ///
    /// The request fails, or a `Location` that is not a URL.
    pub async fn open(&mut self, url: &Url) -> anyhow::Result<(StatusCode, Option<Url>, String)> {
        let response = self.http.get(url.clone()).header(COOKIE, self.cookie_header(url)).send().await?;
        self.keep_cookies(url, &response);
        let location = match response.headers().get(LOCATION) {
            Some(location) => Some(url.join(location.to_str()?)?),
            None => None,
        };
        Ok((response.status(), location, response.text().await?))
    }

    /// Opens `authorization_url`, signs in as `login` at the development login form, consents,
    /// and returns the redirect to `redirect_uri` (with its `code`, `state` and `iss`, or an
    /// `error`), without requesting it.
    ///
    /// # Errors
    ///
    /// A page that is neither a redirect nor a form it knows, or more than [`MAX_STEPS`].
    pub async fn authorize(&mut self, authorization_url: &Url, login: &str, redirect_uri: &str) -> anyhow::Result<Url> {
        let mut url = authorization_url.clone();
        let mut form: Option<String> = None;
        for _ in 0..MAX_STEPS {
            let request = match form.take() {
                Some(body) => {
                    self.http.post(url.clone()).header(CONTENT_TYPE, "application/x-www-form-urlencoded").body(body)
                }
                None => self.http.get(url.clone()),
            };
            let response = request.header(COOKIE, self.cookie_header(&url)).send().await?;
            self.keep_cookies(&url, &response);
            let status = response.status();
            if let Some(location) = response.headers().get(LOCATION) {
                let next = url.join(location.to_str()?)?;
                if next.as_str().starts_with(redirect_uri) {
                    return Ok(next);
                }
                url = next;
                continue;
            }
            let page = response.text().await?;
            if status != StatusCode::OK {
                bail!("{url} answered {status}: {page}");
            }
            let action = form_action(&page).with_context(|| format!("no form at {url}: {page}"))?;
            form = Some(if page.contains(r#"name="prompt" value="login""#) {
                form_body(&[("prompt", "login"), ("login", login), ("password", "any")])
            } else if page.contains(r#"name="prompt" value="consent""#) {
                form_body(&[("prompt", "consent")])
            } else {
                bail!("a form at {url} that is neither login nor consent: {page}");
            });
            url = url.join(&action)?;
        }
        bail!("no redirect to {redirect_uri} after {MAX_STEPS} requests (last at {url})")
    }

    fn cookie_header(&self, url: &Url) -> String {
        let jar = self.cookies.get(url.host_str().unwrap_or_default());
        jar.into_iter().flatten().map(|(name, value)| format!("{name}={value}")).collect::<Vec<_>>().join("; ")
    }

    fn keep_cookies(&mut self, url: &Url, response: &reqwest::Response) {
        let jar = self.cookies.entry(url.host_str().unwrap_or_default().to_owned()).or_default();
        for set in response.headers().get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let pair = set.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                if value.is_empty() {
                    jar.remove(name.trim());
                } else {
                    jar.insert(name.trim().to_owned(), value.to_owned());
                }
            }
        }
    }
}

/// The `action` of the first form on `page`.
fn form_action(page: &str) -> Option<String> {
    let rest = &page[page.find("<form")?..];
    let rest = &rest[rest.find("action=\"")? + "action=\"".len()..];
    Some(rest[..rest.find('"')?].replace("&amp;", "&"))
}

/// An `application/x-www-form-urlencoded` body.
fn form_body(fields: &[(&str, &str)]) -> String {
    let mut url = Url::parse("http://form.invalid/").expect("a constant URL");
    url.query_pairs_mut().extend_pairs(fields);
    url.query().unwrap_or_default().to_owned()
}
