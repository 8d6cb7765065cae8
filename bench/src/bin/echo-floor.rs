//! `echo-floor`: the least a JSON-RPC `tools/call echo` over HTTP/1.1 can cost on this stack.
//!
//! Not an MCP server: it checks nothing (no version, no headers, no capabilities), reads only
//! the request's `id` and `params.arguments.text`, and writes only what the load generator's
//! `sync` scenario checks (`result.content[0].text`; no `resultType`). It runs on what mcpgate
//! and rmcp-reference both run on (`axum::serve` on hyper, tokio's multi-thread runtime,
//! serde_json, the same release profile), so `scripts/bench-peers FLOOR=1` can show a lower
//! bound of what the transport costs (loopback TCP, HTTP/1.1, reading and writing the JSON),
//! and so an upper bound of each server's own work.
//!
//! Usage: `echo-floor [--listen ADDR]` (default `127.0.0.1:0`); prints `listening on
//! http://ADDR` once bound; answers `POST /mcp`. Runs until killed.

use std::io::Write as _;
use std::net::SocketAddr;

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// The members of a `tools/call` the answer needs; serde_json scans the others without
/// building values of them.
#[derive(Deserialize)]
struct Call<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    #[serde(borrow)]
    params: Params<'a>,
}

#[derive(Deserialize)]
struct Params<'a> {
    #[serde(borrow)]
    arguments: Arguments<'a>,
}

#[derive(Deserialize)]
struct Arguments<'a> {
    #[serde(borrow)]
    text: std::borrow::Cow<'a, str>,
}

#[derive(Serialize)]
struct Answer<'a> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: Content<'a>,
}

#[derive(Serialize)]
struct Content<'a> {
    content: [Text<'a>; 1],
}

#[derive(Serialize)]
struct Text<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    text: &'a str,
}

async fn echo(body: Bytes) -> Response {
    let Ok(call) = serde_json::from_slice::<Call<'_>>(&body) else {
        return (StatusCode::BAD_REQUEST, "not an echo call").into_response();
    };
    let answer = Answer {
        jsonrpc: "2.0",
        id: call.id,
        result: Content { content: [Text { kind: "text", text: &call.params.arguments.text }] },
    };
    match serde_json::to_vec(&answer) {
        Ok(json) => ([(header::CONTENT_TYPE, "application/json")], json).into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        match (flag.as_str(), args.next()) {
            ("--listen", Some(value)) => listen = value.parse().map_err(|e| format!("--listen {value}: {e}"))?,
            _ => return Err(format!("unknown argument {flag}; usage: echo-floor [--listen ADDR]").into()),
        }
    }
    let router = axum::Router::new().route("/mcp", axum::routing::post(echo));
    let listener = tokio::net::TcpListener::bind(listen).await?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{}", listener.local_addr()?)?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, router).await?;
    Ok(())
}
