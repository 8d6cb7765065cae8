//! `mcpgate admin`: the admin API from a shell. Every command is one or more HTTP requests to
//! one replica's admin listener; answers are printed as JSON; any failure is a non-zero exit
//! with the API's own message. The token comes from `MCPGATE_ADMIN_TOKEN` or a file, never
//! from the command line (other local users can read command lines).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// `mcpgate admin`: operate a fleet through one replica's admin API.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The replica's admin API, e.g. http://127.0.0.1:9091 (or MCPGATE_ADMIN_URL).
    #[arg(long, env = "MCPGATE_ADMIN_URL", value_name = "URL")]
    url: String,
    /// A file holding the admin token (otherwise MCPGATE_ADMIN_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, Subcommand)]
enum AdminCommand {
    /// Tasks of every owner.
    #[command(subcommand)]
    Tasks(TasksCommand),
    /// This replica stops claiming jobs; its running tasks finish.
    Drain,
    /// This replica claims jobs again.
    Undrain,
    /// This replica's workers: draining or not, tasks running.
    Status,
    /// Every live replica's heartbeat (version, config hash, start, tasks, draining), with
    /// the replicas whose configuration differs from the majority's flagged.
    Fleet,
    /// Users' connections to oauth upstreams (metadata only, never a token).
    #[command(subcommand)]
    Credentials(CredentialsCommand),
    /// Pinned tool definitions: what is withheld, and approving it.
    #[command(subcommand)]
    Tools(ToolsCommand),
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// Tools of pinned upstreams withheld until approved: approved vs current definition,
    /// the fields that changed, and the hash to approve.
    Diff {
        /// One pinned upstream (otherwise every one).
        #[arg(long)]
        upstream: Option<String>,
        /// Print the API's JSON instead of the readable diff.
        #[arg(long)]
        json: bool,
    },
    /// Approves withheld definitions: one tool with the hash `diff` printed, or, with --all,
    /// every tool of the upstream `diff` shows now, printed first and approved exactly as
    /// printed (a definition that changes in between is refused, not approved).
    Approve {
        /// The pinned upstream.
        #[arg(long)]
        upstream: String,
        /// The upstream's own name of the tool.
        #[arg(long, requires = "hash", conflicts_with = "all", required_unless_present = "all")]
        tool: Option<String>,
        /// The definition hash `diff` printed (a definition changed since is not approved).
        #[arg(long, requires = "tool")]
        hash: Option<String>,
        /// Every tool of the upstream `diff` shows now: printed, then approved by the hashes printed.
        #[arg(long)]
        all: bool,
    },
}

#[derive(Debug, Subcommand)]
enum CredentialsCommand {
    /// Lists connections, following every cursor.
    List {
        /// A principal, as listed (`<issuer length>:<issuer><subject>`).
        #[arg(long)]
        principal: Option<String>,
        /// An upstream's name.
        #[arg(long)]
        upstream: Option<String>,
    },
    /// Forgets one user's connection (their next call asks them to connect again).
    Revoke {
        /// The principal, as listed.
        principal: String,
        /// The upstream's name.
        upstream: String,
    },
}

#[derive(Debug, Subcommand)]
enum TasksCommand {
    /// Lists tasks (metadata only), following every cursor unless --limit is given.
    List {
        /// The owner: its token's subject (sub), of any issuer unless --issuer is given.
        #[arg(long)]
        owner: Option<String>,
        /// The owner's token issuer (iss).
        #[arg(long)]
        issuer: Option<String>,
        /// Statuses, comma-separated (working, input_required, completed, failed, cancelled).
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        tool: Option<String>,
        #[arg(long)]
        upstream: Option<String>,
        /// At most about this many tasks (one page).
        #[arg(long)]
        limit: Option<usize>,
    },
    /// One task's metadata (and payloads where the replica shows them).
    Inspect { id: String },
    /// Cancels a task, whoever owns it.
    Cancel { id: String },
    /// Deletes ended tasks (all of those selected, following every cursor).
    Purge {
        /// Terminal statuses, comma-separated [completed,failed,cancelled].
        #[arg(long)]
        status: Option<String>,
        /// The owner: its token's subject (sub), of any issuer unless --issuer is given.
        #[arg(long)]
        owner: Option<String>,
        /// The owner's token issuer (iss).
        #[arg(long)]
        issuer: Option<String>,
        #[arg(long)]
        tool: Option<String>,
        #[arg(long)]
        upstream: Option<String>,
        /// Only tasks whose last change is at least this many seconds old.
        #[arg(long, value_name = "SECS")]
        older_than: Option<u64>,
    },
}

/// Runs one admin command; its output is printed.
pub fn run(args: AdminArgs) -> anyhow::Result<()> {
    let token = match &args.token_file {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?,
        None => std::env::var("MCPGATE_ADMIN_TOKEN").context("set MCPGATE_ADMIN_TOKEN or --token-file")?,
    };
    let token = token.trim().to_owned();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("starting the runtime")?;
    let out = runtime.block_on(execute(&args.url, &token, args.command))?;
    match out {
        // A readable report (`tools diff`), printed as is.
        Value::String(text) => print!("{text}"),
        out => println!("{}", serde_json::to_string_pretty(&out).unwrap_or_else(|_| out.to_string())),
    }
    Ok(())
}

async fn execute(url: &str, token: &str, command: AdminCommand) -> anyhow::Result<Value> {
    let api = Api { base: url.trim_end_matches('/').to_owned(), token: token.to_owned(), http: client()? };
    match command {
        AdminCommand::Drain => api.send(reqwest::Method::POST, "/admin/drain", None).await,
        AdminCommand::Undrain => api.send(reqwest::Method::POST, "/admin/undrain", None).await,
        AdminCommand::Status => api.send(reqwest::Method::GET, "/admin/status", None).await,
        AdminCommand::Fleet => api.send(reqwest::Method::GET, "/admin/fleet", None).await,
        AdminCommand::Credentials(CredentialsCommand::Revoke { principal, upstream }) => {
            let body = json!({ "principal": principal, "upstream": upstream });
            api.send(reqwest::Method::POST, "/admin/credentials/revoke", Some(&body)).await
        }
        AdminCommand::Credentials(CredentialsCommand::List { principal, upstream }) => {
            let query: Vec<(&str, String)> = [("principal", principal), ("upstream", upstream)]
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect();
            let mut credentials = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut step = query.clone();
                if let Some(c) = &cursor {
                    step.push(("cursor", c.clone()));
                }
                let path = format!("/admin/credentials?{}", form(&step));
                let page = api.send(reqwest::Method::GET, &path, None).await?;
                credentials.extend(page["credentials"].as_array().cloned().unwrap_or_default());
                match page["nextCursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
            Ok(json!({ "credentials": credentials }))
        }
        AdminCommand::Tools(ToolsCommand::Diff { upstream, json }) => {
            let query: Vec<(&str, String)> = upstream.map(|u| ("upstream", u)).into_iter().collect();
            let out = api.send(reqwest::Method::GET, &format!("/admin/tools/withheld?{}", form(&query)), None).await?;
            Ok(if json { out } else { Value::String(super::pins::render_diff(&out)) })
        }
        AdminCommand::Tools(ToolsCommand::Approve { upstream, tool, hash, all }) => {
            if !all {
                let body = json!({ "upstream": upstream, "tools": [{ "tool": tool, "hash": hash }] });
                return api.send(reqwest::Method::POST, "/admin/tools/approve", Some(&body)).await;
            }
            // What is approved is exactly what is printed here: the pairs of this one read.
            let path = format!("/admin/tools/withheld?{}", form(&[("upstream", upstream.clone())]));
            let shown = api.send(reqwest::Method::GET, &path, None).await?;
            let pairs = super::pins::approvable_pairs(&shown);
            print!("{}", super::pins::render_diff(&shown));
            if pairs.is_empty() {
                return Ok(Value::String("nothing to approve\n".to_owned()));
            }
            let body = json!({ "upstream": upstream, "tools": pairs });
            api.send(reqwest::Method::POST, "/admin/tools/approve", Some(&body)).await
        }
        AdminCommand::Tasks(TasksCommand::Inspect { id }) => {
            api.send(reqwest::Method::GET, &format!("/admin/tasks/{}", encode(&id)), None).await
        }
        AdminCommand::Tasks(TasksCommand::Cancel { id }) => {
            api.send(reqwest::Method::POST, &format!("/admin/tasks/{}/cancel", encode(&id)), None).await
        }
        AdminCommand::Tasks(TasksCommand::List { owner, issuer, status, tool, upstream, limit }) => {
            let mut query: Vec<(&str, String)> =
                [("owner", owner), ("issuer", issuer), ("status", status), ("tool", tool), ("upstream", upstream)]
                    .into_iter()
                    .filter_map(|(k, v)| v.map(|v| (k, v)))
                    .collect();
            if let Some(limit) = limit {
                query.push(("limit", limit.to_string()));
                let path = format!("/admin/tasks?{}", form(&query));
                return api.send(reqwest::Method::GET, &path, None).await;
            }
            let mut tasks = Vec::new();
            let mut cursor: Option<String> = None;
            loop {
                let mut step = query.clone();
                if let Some(c) = &cursor {
                    step.push(("cursor", c.clone()));
                }
                let page = api.send(reqwest::Method::GET, &format!("/admin/tasks?{}", form(&step)), None).await?;
                tasks.extend(page["tasks"].as_array().cloned().unwrap_or_default());
                match page["nextCursor"].as_str() {
                    Some(next) => cursor = Some(next.to_owned()),
                    None => break,
                }
            }
            Ok(json!({ "tasks": tasks }))
        }
        AdminCommand::Tasks(TasksCommand::Purge { status, owner, issuer, tool, upstream, older_than }) => {
            let mut body = json!({ "owner": owner, "issuer": issuer, "tool": tool, "upstream": upstream,
                "olderThanSecs": older_than });
            if let Some(status) = status {
                body["status"] = status.split(',').map(|s| Value::String(s.trim().to_owned())).collect();
            }
            let mut purged = 0;
            loop {
                let page = api.send(reqwest::Method::POST, "/admin/tasks/purge", Some(&body)).await?;
                purged += page["purged"].as_u64().unwrap_or(0);
                match page["nextCursor"].as_str() {
                    Some(next) => body["cursor"] = next.into(),
                    None => break,
                }
            }
            Ok(json!({ "purged": purged }))
        }
    }
}

struct Api {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Api {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> anyhow::Result<Value> {
        let url = format!("{}{path}", self.base);
        let mut request = self.http.request(method, &url).bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.header(reqwest::header::CONTENT_TYPE, "application/json").body(body.to_string());
        }
        let response = request.send().await.with_context(|| format!("calling {url}"))?;
        let status = response.status();
        let text = response.text().await.with_context(|| format!("reading the answer of {url}"))?;
        let value: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if !status.is_success() {
            // The admin API answers every failure with `{"error": …}` (an unknown route too);
            // anything else came from another listener, most often the replica's MCP port.
            let Some(message) = value["error"].as_str() else {
                bail!(
                    "{url}: {status}, and not from mcpgate's admin API (it answers with an \"error\" message): \
                     this reached some other listener — is it the MCP port? Point --url (MCPGATE_ADMIN_URL) at \
                     a replica's admin listener, the address of its admin.listen setting"
                );
            };
            bail!("{url}: {status}: {message}");
        }
        Ok(value)
    }
}

fn client() -> anyhow::Result<reqwest::Client> {
    // The HTTP client is built without a default TLS backend: https uses the process's provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().timeout(Duration::from_secs(60)).build().context("building the HTTP client")
}

/// Percent-encodes a path segment or query value (everything but unreserved characters).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn form(pairs: &[(&str, String)]) -> String {
    pairs.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect::<Vec<_>>().join("&")
}
