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
//!
//! Rooms: `setup` (mcpgate's config for a scenario and the caller's token), `session` (a client
//! of mcpgate in one era: lists, calls, tasks followed to their end), `answers` (what the client
//! makes up: arguments from a schema, answers to input requests), `connect` (the user of an
//! `auth = "oauth"` upstream: connect links asked for and opened), `browser` (the user agent
//! that opens them).

mod answers;
mod browser;
mod connect;
mod session;
mod setup;

use std::time::Duration;

use anyhow::{Context as _, bail};
use serde_json::Value;

use mcpgate_e2e::{Client, Gateway};

use browser::Browser;
use session::Session;
use setup::{caller_bearer, oauth_config, upstream_config};

/// The whole run ends within this (the suite's own client timeout is 30 s).
const DEADLINE: Duration = Duration::from_secs(25);
const MODERN: &str = "2026-07-28";

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
