//! A stand-in Streamable HTTP server on an ephemeral loopback port: answers each POST with
//! what a closure makes of its JSON-RPC body (or of the whole request: headers too), and
//! records every request it saw and how many connections it accepted and closed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// An HTTP answer: status, content type and body.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: &'static str,
    pub(crate) body: String,
    /// Extra response headers.
    pub(crate) headers: Vec<(&'static str, String)>,
}

impl Answer {
    /// 200 with a JSON-RPC result for request `id`.
    pub(crate) fn result(id: &Value, result: Value) -> Self {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
        Self { status: 200, content_type: "application/json", body, headers: Vec::new() }
    }

    /// `status` with a JSON-RPC error for request `id`.
    pub(crate) fn error(status: u16, id: &Value, code: i64, message: &str) -> Self {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string();
        Self { status, content_type: "application/json", body, headers: Vec::new() }
    }

    /// `status` with an empty body (an HTTP-level refusal).
    pub(crate) fn status(status: u16) -> Self {
        Self { status, content_type: "text/plain", body: String::new(), headers: Vec::new() }
    }

    /// Adds a response header.
    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }
}

/// A request the stand-in received: its headers (lower-case names) and JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: Value,
}

impl Seen {
    /// The value of header `name` (lower case), if sent.
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method.
    pub(crate) fn method(&self) -> &str {
        self.body["method"].as_str().unwrap_or_default()
    }
}

/// A running stand-in.
pub(crate) struct StandIn {
    pub(crate) url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    /// Connections accepted, and closed by the stand-in or its peer.
    accepted: Arc<AtomicU64>,
    closed: Arc<AtomicU64>,
}

impl StandIn {
    /// Serves `answer` for every POST until the test ends.
    pub(crate) async fn start(answer: impl Fn(&Value) -> Answer + Send + Sync + 'static) -> Self {
        Self::start_seeing(move |seen| answer(&seen.body)).await
    }

    /// Serves what `answer` makes of each whole request (headers and body) until the test ends.
    pub(crate) async fn start_seeing(answer: impl Fn(&Seen) -> Answer + Send + Sync + 'static) -> Self {
        Self::serve(answer, false).await
    }

    /// Like [`StandIn::start`], closing each connection right after its first answer, without
    /// saying so (no `Connection: close`): as a server whose keep-alive timer fired.
    pub(crate) async fn start_closing(answer: impl Fn(&Value) -> Answer + Send + Sync + 'static) -> Self {
        Self::serve(move |seen: &Seen| answer(&seen.body), true).await
    }

    async fn serve(answer: impl Fn(&Seen) -> Answer + Send + Sync + 'static, close_each: bool) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let answer = Arc::new(answer);
        let log = seen.clone();
        let (accepted, closed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (opened, ended) = (accepted.clone(), closed.clone());
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                opened.fetch_add(1, Ordering::SeqCst);
                let (log, answer, ended) = (log.clone(), answer.clone(), ended.clone());
                tokio::spawn(async move {
                    let _closed = Counted(ended);
                    // Keep-alive: several requests may come on one connection.
                    let mut buffer = Vec::new();
                    loop {
                        let Ok(Ok(Some((head, body)))) =
                            tokio::time::timeout(Duration::from_secs(10), read_request(&mut socket, &mut buffer)).await
                        else {
                            return;
                        };
                        let headers: Vec<(String, String)> = head
                            .lines()
                            .skip(1)
                            .filter_map(|l| l.split_once(':'))
                            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
                            .collect();
                        let body: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                        let seen = Seen { headers, body };
                        let reply = if seen.body.get("id").is_some() { answer(&seen) } else { Answer::status(202) };
                        log.lock().unwrap().push(seen);
                        let extra: String =
                            reply.headers.iter().map(|(name, value)| format!("{name}: {value}\r\n")).collect();
                        let response = format!(
                            "HTTP/1.1 {} X\r\ncontent-type: {}\r\ncontent-length: {}\r\n{extra}\r\n{}",
                            reply.status,
                            reply.content_type,
                            reply.body.len(),
                            reply.body
                        );
                        if socket.write_all(response.as_bytes()).await.is_err() || close_each {
                            return;
                        }
                    }
                });
            }
        });
        Self { url, seen, accepted, closed }
    }

    /// Connections accepted so far.
    pub(crate) fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections closed so far (by either side).
    pub(crate) fn closed(&self) -> u64 {
        self.closed.load(Ordering::SeqCst)
    }

    /// Every request seen so far.
    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The methods of the requests seen so far, in order.
    pub(crate) fn methods(&self) -> Vec<String> {
        self.seen().iter().map(|s| s.method().to_owned()).collect()
    }
}

/// Counts a connection's end when dropped.
struct Counted(Arc<AtomicU64>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// Reads one request (head and a `content-length` body); `None` when the peer closed.
async fn read_request(
    socket: &mut tokio::net::TcpStream,
    buffer: &mut Vec<u8>,
) -> std::io::Result<Option<(String, String)>> {
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_string();
            let length = head
                .lines()
                .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:")?.trim().parse().ok())
                .unwrap_or(0usize);
            if buffer.len() >= end + 4 + length {
                let body = String::from_utf8_lossy(&buffer[end + 4..end + 4 + length]).to_string();
                buffer.drain(..end + 4 + length);
                return Ok(Some((head, body)));
            }
        }
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
}
