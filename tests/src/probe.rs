//! Readiness by a server's own answer: one HTTP/1.1 request on a plain loopback socket (the
//! harness starts processes from synchronous code), ready once the answer holds an expected
//! marker. Something else listening on the port, or a server still starting, is "not yet".
//!
//! Invariant: a probe never blocks longer than its read timeout, and reads at most 64 KiB.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use crate::wait::Look;

/// How long one probe waits for each read.
const READ_TIMEOUT: Duration = Duration::from_secs(2);

/// Sends `request` (a whole HTTP/1.1 request) to `127.0.0.1:port` and reads the answer until it
/// contains `expect` (then done), or ends, or stalls (then not yet, with what it got).
pub(crate) fn answers(port: u16, request: &str, expect: &str) -> Look<()> {
    let mut socket = match TcpStream::connect(("127.0.0.1", port)) {
        Ok(socket) => socket,
        Err(e) => return Look::NotYet(format!("connecting to port {port}: {e}")),
    };
    if let Err(e) = socket.set_read_timeout(Some(READ_TIMEOUT)).and_then(|()| socket.write_all(request.as_bytes())) {
        return Look::NotYet(format!("sending to port {port}: {e}"));
    }
    let mut answer = Vec::new();
    let mut chunk = [0u8; 4096];
    while answer.len() < 64 * 1024 {
        if String::from_utf8_lossy(&answer).contains(expect) {
            return Look::Done(());
        }
        match socket.read(&mut chunk) {
            Ok(n) if n > 0 => answer.extend_from_slice(&chunk[..n]),
            _ => break,
        }
    }
    if String::from_utf8_lossy(&answer).contains(expect) {
        return Look::Done(());
    }
    Look::NotYet(format!("port {port} answered without {expect:?}: {:?}", String::from_utf8_lossy(&answer)))
}

/// An MCP `initialize` POSTed to `path`: any MCP server of the 2025-11-25 era (and FastMCP,
/// which speaks both) answers with its `serverInfo`.
pub(crate) fn initialize(path: &str) -> String {
    let body = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"mcpgate-e2e-probe","version":"1"}}}"#;
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// A plain GET of `path`.
pub(crate) fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: */*\r\nConnection: close\r\n\r\n")
}
