//! Reading HTTP/1.1 requests in the tests' stand-in servers (an OTLP collector, an OAuth
//! token endpoint): plain enough to need no HTTP server crate, strict about lengths.
//!
//! Invariant: a read is bounded by `idle` per chunk; what follows a request on a keep-alive
//! connection stays in the buffer for the next one.

use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;

/// One request as received.
#[derive(Debug, Clone)]
pub struct StandInRequest {
    /// The request line and headers.
    pub head: String,
    /// The body (`Content-Length` bytes).
    pub body: Vec<u8>,
}

impl StandInRequest {
    /// The request target.
    pub fn path(&self) -> &str {
        self.head.split_whitespace().nth(1).unwrap_or_default()
    }

    /// The value of header `name` (case-insensitive), if sent.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

/// The next request on `socket` (`buffer` keeps what was read beyond the previous one);
/// `None` once the peer closes or sends nothing for `idle`.
pub async fn next_request(socket: &mut TcpStream, buffer: &mut Vec<u8>, idle: Duration) -> Option<StandInRequest> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let partial = StandInRequest { head, body: Vec::new() };
            let length = partial.header("content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
            if buffer.len() >= end + 4 + length {
                let body = buffer[end + 4..end + 4 + length].to_vec();
                buffer.drain(..end + 4 + length);
                return Some(StandInRequest { body, ..partial });
            }
        }
        match tokio::time::timeout(idle, socket.read(&mut chunk)).await {
            Ok(Ok(n)) if n > 0 => buffer.extend_from_slice(&chunk[..n]),
            _ => return None,
        }
    }
}
