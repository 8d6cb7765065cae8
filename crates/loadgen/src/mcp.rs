//! The load generator's MCP calls, on `mcpgate-client`: 2026-07-28 requests declaring the
//! capabilities a flow needs, 2025-11-25 requests in a session, and every outcome sorted into
//! a [`CallError`] the report can count. A plain `http://` endpoint is driven over
//! [`Connections`] (lean keep-alive HTTP/1.1, so the driver's CPU per request, which the box
//! shares with the servers it measures, stays small); any other over a `reqwest` [`Client`].
//!
//! Invariant: every request is bounded in time; a failure says whether it is worth retrying
//! (transport errors and 502/503/504, which a load balancer or a restarting replica causes).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mcpgate_client::{Client, ClientError, Connections, McpRequest, Response};
use mcpgate_protocol::ProtocolVersion;
use mcpgate_protocol::capabilities::TASKS_EXTENSION;
use mcpgate_protocol::meta::{CLIENT_CAPABILITIES_KEY, CLIENT_INFO_KEY};
use reqwest::header::AUTHORIZATION;
use serde_json::{Value, json};

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
    transport: Transport,
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

/// How requests travel.
#[derive(Debug, Clone)]
enum Transport {
    /// A plain `http://` endpoint.
    Plain(Arc<Connections>),
    /// Anything else (TLS included).
    Any(Client),
}

/// Bounds every request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);
/// Bounds every connect.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

impl Mcp {
    pub(crate) fn new(url: &str, authorization: Option<String>, clients: usize) -> anyhow::Result<Self> {
        let transport = match Connections::new(url) {
            Some(plain) => Transport::Plain(Arc::new(
                plain.max_idle(clients).timeout(REQUEST_TIMEOUT).connect_timeout(CONNECT_TIMEOUT),
            )),
            None => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let http = reqwest::Client::builder()
                    .timeout(REQUEST_TIMEOUT)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .pool_max_idle_per_host(clients)
                    .build()?;
                Transport::Any(Client::new(http))
            }
        };
        Ok(Self { transport, url: url.to_owned(), authorization, sent: Arc::new(AtomicU64::new(0)) })
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
            caps["extensions"] = json!({TASKS_EXTENSION: {}});
        }
        // Added to the `_meta` the caller gave (e.g. an idempotency key), if any.
        if !params["_meta"].is_object() {
            params["_meta"] = json!({});
        }
        params["_meta"][CLIENT_CAPABILITIES_KEY] = caps;
        params["_meta"][CLIENT_INFO_KEY] = json!({"name": "mcpgate-loadgen", "version": env!("CARGO_PKG_VERSION")});
        self.post(McpRequest::modern(id, method, params)).await
    }

    /// A 2025-11-25 request (in `session` when given).
    pub(crate) async fn legacy(
        &self,
        id: &str,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Answer, CallError> {
        self.post(McpRequest::legacy(id, method, params, session)).await
    }

    /// A new 2025-11-25 session.
    pub(crate) async fn initialize(&self, id: &str) -> Result<String, CallError> {
        let params = json!({
            "protocolVersion": ProtocolVersion::LATEST_LEGACY.as_str(),
            "capabilities": {"elicitation": {}},
            "clientInfo": {"name": "mcpgate-loadgen", "version": env!("CARGO_PKG_VERSION")},
        });
        let answer = self.legacy(id, "initialize", params, None).await?;
        answer.session.ok_or_else(|| CallError::Malformed("initialize returned no Mcp-Session-Id".to_owned()))
    }

    async fn post(&self, mut request: McpRequest) -> Result<Answer, CallError> {
        if let Some(auth) = &self.authorization {
            request = request.header(AUTHORIZATION.as_str(), auth.as_str());
        }
        self.sent.fetch_add(1, Ordering::Relaxed);
        let sent = match &self.transport {
            Transport::Plain(connections) => connections.send(&request).await,
            Transport::Any(client) => client.send(&self.url, &request).await,
        };
        let reply = sent.map_err(|e| match e {
            ClientError::Send { source, .. } | ClientError::Read { source } => CallError::Transport(source.to_string()),
            ClientError::Exchange { source, .. } => CallError::Transport(source.to_string()),
            e @ ClientError::TimedOut { .. } => CallError::Transport(e.to_string()),
            other => CallError::Malformed(other.to_string()),
        })?;
        let status = reply.status;
        let Some(message) = reply.message(request.id()) else {
            return Err(if reply.is_sse() && (200..300).contains(&status) {
                // The stream was cut before its answer: the replica went away mid-request.
                CallError::Transport("stream ended before the answer".to_owned())
            } else if (200..300).contains(&status) {
                CallError::Malformed(format!("no answer in {} bytes", reply.body.len()))
            } else {
                CallError::Status(status)
            });
        };
        match Response::from_message(message).map(|r| r.outcome) {
            Some(Ok(result)) => Ok(Answer { result, session: reply.session }),
            Some(Err(error)) => Err(CallError::Rpc { code: error.code, message: error.message, status }),
            None => Err(CallError::Malformed("neither result nor error".to_owned())),
        }
    }
}
