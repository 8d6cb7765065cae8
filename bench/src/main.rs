//! `rmcp-reference`: the two benchmark tools of issue 31 (`echo`, `slow_compute`) served by the
//! official Rust SDK, rmcp 3.9.0, over stateless Streamable HTTP with JSON answers.
//!
//! Usage: `rmcp-reference [--listen ADDR] [--task-ttl-ms MS]` (default `127.0.0.1:0` and rmcp's
//! default task TTL). Prints `listening on http://ADDR` once bound, like mcpgate, so the bench
//! scripts start both the same way; the MCP endpoint is `/mcp`. Runs until killed.
//!
//! The runtime is `#[tokio::main]`'s multi-thread one, one worker per core: the same as
//! mcpgate's (`Builder::new_multi_thread()` with its defaults).

mod reference;

use std::io::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::reference::Reference;

/// The command line.
struct Args {
    listen: SocketAddr,
    /// `None`: rmcp's default (`TaskOptions::default()`).
    task_ttl_ms: Option<u64>,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { listen: SocketAddr::from(([127, 0, 0, 1], 0)), task_ttl_ms: None };
    let mut given = std::env::args().skip(1);
    while let Some(flag) = given.next() {
        let value = given.next().ok_or_else(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--listen" => args.listen = value.parse().map_err(|e| format!("--listen {value}: {e}"))?,
            "--task-ttl-ms" => {
                args.task_ttl_ms = Some(value.parse().map_err(|e| format!("--task-ttl-ms {value}: {e}"))?);
            }
            _ => {
                return Err(format!(
                    "unknown argument {flag}; usage: rmcp-reference [--listen ADDR] [--task-ttl-ms MS]"
                ));
            }
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    // One server value for the whole process: the service factory below runs once per request
    // (stateless), and every request must see the same task manager.
    let server = Reference::new(args.task_ttl_ms);
    // Stateless (no sessions, even for pre-2026-07-28 requests) and JSON answers: what the
    // SDK documents for a simple request/response server behind a load balancer.
    let config = StreamableHttpServerConfig::default().with_legacy_session_mode(false).with_json_response(true);
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(NeverSessionManager::default()), config);
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind(args.listen).await?;
    let addr = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{addr}")?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, router).await?;
    Ok(())
}
