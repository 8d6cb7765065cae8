//! A minimal MCP-over-HTTP client for load: 2026-07-28 requests with `_meta` and mirrored
//! headers, 2025-11-25 requests in a session, replies read as JSON or as an SSE stream whose
//! last message answers the request.
//!
//! Invariant: every request is bounded in time; a failure says whether it is worth retrying
//! (transport errors and 502/503/504, which a load balancer or a restarting replica causes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// Why a request failed.
#[derive(Debug, Clone)]
pub(crate) enum CallError {
    /// No reply: connection refused or reset, or timed out.
    Transport(String),
    /// An HTTP error status without a JSON-RPC answer.
    Status(u16),
    /// A JSON-RPC error.
    Rpc {
        /// The error code.
        code: i64,
        /// Its message.
        message: String,
        /// The HTTP status it came with.
        status: u16,
    },
    /// A reply that is not a JSON-RPC answer to the request.
    Malformed(String),
}

impl CallError {
    /// Whether retrying the same request (same id) may succeed: no reply, a load balancer's
    /// or an overloaded server's 502/503/504, or a store outage the server reports mid-stream
    /// (an SSE reply has already said 200).
    pub(crate) fn transient(&self) -> bool {
        match self {
            Self::Transport(_) => true,
            Self::Status(s) => matches!(s, 502..=504),
            Self::Rpc { status, code, message } => {
                matches!(status, 502..=504) || (*code == -32603 && message.contains("task store unavailable"))
            }
            Self::Malformed(_) => false,
        }
    }

    /// A short label for the report.
    pub(crate) fn kind(&self) -> String {
        match self {
            Self::Transport(_) => "transport".to_owned(),
            Self::Status(s) => format!("http_{s}"),
            Self::Rpc { code, .. } => format!("rpc_{code}"),
            Self::Malformed(_) => "malformed".to_owned(),
        }
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Transport(e) => write!(f, "transport: {e}"),
            Self::Status(s) => write!(f, "HTTP {s}"),
            Self::Rpc { code, message, status } => write!(f, "JSON-RPC {code} (HTTP {status}): {message}"),
            Self::Malformed(e) => write!(f, "malformed reply: {e}"),
        }
    }
}

/// A client of one endpoint (cheap to clone: the connection pool is shared).
#[derive(Debug, Clone)]
pub(crate) struct Mcp {
    http: reqwest::Client,
    url: String,
    authorization: Option<String>,
    /// HTTP requests sent, by every clone (for requests per second next to flows).
    sent: Arc<AtomicU64>,
}

/// What one reply carried.
#[derive(Debug)]
pub(crate) struct Answer {
    /// The JSON-RPC result.
    pub(crate) result: Value,
    /// `Mcp-Session-Id`, if any.
    pub(crate) session: Option<String>,
}

impl Mcp {
    pub(crate) fn new(url: &str, authorization: Option<String>, clients: usize) -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .connect_timeout(Duration::from_secs(5))
            .pool_max_idle_per_host(clients)
            .build()?;
        Ok(Self { http, url: url.to_owned(), authorization, sent: Arc::new(AtomicU64::new(0)) })
    }

    /// HTTP requests sent so far.
    pub(crate) fn requests_sent(&self) -> u64 {
        self.sent.load(Ordering::Relaxed)
    }

    /// A 2026-07-28 request declaring `caps` (plus the tasks extension when `tasks`).
    pub(crate) async fn modern(
        &self,
        id: &str,
        method: &str,
        mut params: Value,
        tasks: bool,
    ) -> Result<Answer, CallError> {
        let mut caps = json!({"elicitation": {}, "sampling": {}, "roots": {}});
        if tasks {
            caps["extensions"] = json!({TASKS: {}});
        }
        let name =
            ["name", "uri", "taskId"].iter().find_map(|k| params.get(*k).and_then(Value::as_str).map(str::to_owned));
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": caps,
            "io.modelcontextprotocol/clientInfo": {"name": "mcpgate-loadgen", "version": env!("CARGO_PKG_VERSION")},
        });
        let mut headers = vec![("mcp-protocol-version", MODERN.to_owned()), ("mcp-method", method.to_owned())];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(id, &headers, &body).await
    }

    /// A 2025-11-25 request (in `session` when given).
    pub(crate) async fn legacy(
        &self,
        id: &str,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Answer, CallError> {
        let mut headers = Vec::new();
        if let Some(session) = session {
            headers.push(("mcp-session-id", session.to_owned()));
            headers.push(("mcp-protocol-version", LEGACY.to_owned()));
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.post(id, &headers, &body).await
    }

    /// A new 2025-11-25 session.
    pub(crate) async fn initialize(&self, id: &str) -> Result<String, CallError> {
        let params = json!({
            "protocolVersion": LEGACY,
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "mcpgate-loadgen", "version": env!("CARGO_PKG_VERSION")},
        });
        let answer = self.legacy(id, "initialize", params, None).await?;
        answer.session.ok_or_else(|| CallError::Malformed("initialize returned no Mcp-Session-Id".to_owned()))
    }

    async fn post(&self, id: &str, headers: &[(&str, String)], body: &Value) -> Result<Answer, CallError> {
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, v);
        }
        if let Some(auth) = &self.authorization {
            req = req.header("authorization", auth);
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        let resp = req.send().await.map_err(|e| CallError::Transport(e.to_string()))?;
        let status = resp.status().as_u16();
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let session = header("mcp-session-id");
        let sse = header("content-type").is_some_and(|c| c.starts_with("text/event-stream"));
        let text = resp.text().await.map_err(|e| CallError::Transport(e.to_string()))?;
        let message = if sse { answer_in_stream(id, &text) } else { serde_json::from_str(&text).ok() };
        let Some(message) = message else {
            return Err(if sse && (200..300).contains(&status) {
                // The stream was cut before its answer: the replica went away mid-request.
                CallError::Transport("stream ended before the answer".to_owned())
            } else if (200..300).contains(&status) {
                CallError::Malformed(format!("no answer in {} bytes", text.len()))
            } else {
                CallError::Status(status)
            });
        };
        if let Some(error) = message.get("error") {
            return Err(CallError::Rpc {
                code: error["code"].as_i64().unwrap_or(0),
                message: error["message"].as_str().unwrap_or_default().to_owned(),
                status,
            });
        }
        match message.get("result") {
            Some(result) => Ok(Answer { result: result.clone(), session }),
            None => Err(CallError::Malformed("neither result nor error".to_owned())),
        }
    }
}

/// The answer to request `id` in an SSE body (notifications before it are skipped).
fn answer_in_stream(id: &str, body: &str) -> Option<Value> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .find(|message| message.get("method").is_none() && message.get("id").and_then(Value::as_str) == Some(id))
}
