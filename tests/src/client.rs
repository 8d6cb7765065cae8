//! The tests' MCP-over-HTTP client: modern and legacy requests built and sent by
//! `mcpgate-client` (the load generator's too), replies read as JSON or SSE, and streams read
//! message by message with a bound on every wait.

use std::time::Duration;

use anyhow::Context;
use mcpgate_client::{McpRequest, Reply};
use mcpgate_protocol::ProtocolVersion;
use mcpgate_protocol::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde_json::Value;

/// How long a stream read as it comes may stay open (its messages have their own bounds).
const STREAM_TIMEOUT: Duration = Duration::from_secs(600);

/// An HTTP client with bounded timeouts.
#[derive(Debug, Clone)]
pub struct Client {
    mcp: mcpgate_client::Client,
}

impl Client {
    /// A client (installs the TLS crypto provider reqwest is built to expect).
    pub fn new() -> anyhow::Result<Self> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .context("building the HTTP client")?;
        Ok(Self { mcp: mcpgate_client::Client::new(http) })
    }

    /// POSTs a raw body with the given headers.
    pub async fn post(&self, url: &str, headers: &[(&str, &str)], body: String) -> anyhow::Result<Reply> {
        Ok(self.mcp.post(url, headers.iter().copied(), body).await?)
    }

    /// Sends a request built with [`McpRequest`] (its own id, headers).
    pub async fn send(&self, url: &str, request: &McpRequest) -> anyhow::Result<Reply> {
        Ok(self.mcp.send(url, request).await?)
    }

    /// POSTs a JSON-RPC notification or response within a 2025-11-25 session (its id and
    /// version headers, then `extra`).
    pub async fn legacy_message(
        &self,
        url: &str,
        session: &str,
        extra: &[(&str, &str)],
        message: &Value,
    ) -> anyhow::Result<Reply> {
        let version = ProtocolVersion::LATEST_LEGACY.as_str();
        let mut headers = vec![(MCP_SESSION_ID, session), (MCP_PROTOCOL_VERSION, version)];
        headers.extend_from_slice(extra);
        self.post(url, &headers, message.to_string()).await
    }

    /// A modern (2026-07-28) request with `_meta` and mirrored headers.
    pub async fn modern(&self, url: &str, method: &str, params: Value) -> anyhow::Result<Reply> {
        self.modern_with(url, &[], method, params).await
    }

    /// A modern request with extra headers (say, `authorization`).
    pub async fn modern_with(
        &self,
        url: &str,
        extra: &[(&str, &str)],
        method: &str,
        params: Value,
    ) -> anyhow::Result<Reply> {
        let request = with_headers(McpRequest::modern(1, method, params), extra);
        Ok(self.mcp.send(url, &request).await?)
    }

    /// A modern request whose SSE reply is read as it streams (`subscriptions/listen`).
    pub async fn modern_stream(&self, url: &str, method: &str, params: Value) -> anyhow::Result<EventStream> {
        let request = McpRequest::modern(1, method, params);
        EventStream::open(self.mcp.open(url, &request, Some(STREAM_TIMEOUT)).await?)
    }

    /// A 2025-11-25 session's GET stream.
    pub async fn get_stream(&self, url: &str, session: &str) -> anyhow::Result<EventStream> {
        let req = self
            .mcp
            .http()
            .get(url)
            .timeout(STREAM_TIMEOUT)
            .header(ACCEPT, "text/event-stream")
            .header(MCP_SESSION_ID, session)
            .header(MCP_PROTOCOL_VERSION, ProtocolVersion::LATEST_LEGACY.as_str());
        EventStream::open(req.send().await.with_context(|| format!("GET {url}"))?)
    }

    /// A legacy (2025-11-25) request, with a session id when given.
    pub async fn legacy(&self, url: &str, method: &str, params: Value, session: Option<&str>) -> anyhow::Result<Reply> {
        self.legacy_with(url, &[], method, params, session).await
    }

    /// A legacy request with extra headers (say, `authorization`).
    pub async fn legacy_with(
        &self,
        url: &str,
        extra: &[(&str, &str)],
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> anyhow::Result<Reply> {
        let request = with_headers(McpRequest::legacy(1, method, params, session), extra);
        Ok(self.mcp.send(url, &request).await?)
    }

    /// A legacy request whose SSE reply is read as it streams.
    pub async fn legacy_stream(
        &self,
        url: &str,
        method: &str,
        params: Value,
        session: &str,
    ) -> anyhow::Result<EventStream> {
        let request = McpRequest::legacy(1, method, params, Some(session));
        EventStream::open(self.mcp.open(url, &request, None).await?)
    }

    /// GET a path.
    pub async fn get(&self, url: &str) -> anyhow::Result<(u16, String)> {
        let resp = self.mcp.http().get(url).send().await.with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await?))
    }
}

/// `request` with the caller's extra headers after its own.
fn with_headers(request: McpRequest, extra: &[(&str, &str)]) -> McpRequest {
    extra.iter().fold(request, |request, (name, value)| request.header(*name, *value))
}

/// An SSE reply read message by message.
#[derive(Debug)]
pub struct EventStream {
    resp: reqwest::Response,
    buffer: String,
}

impl EventStream {
    /// The next response on the stream (a message with `result` or `error`), skipping
    /// notifications and requests; fails when the stream ends first or nothing comes within
    /// `within` of any message.
    pub async fn next_result(&mut self, within: Duration) -> anyhow::Result<Value> {
        loop {
            let message = self.next(within).await?.context("the stream ended before its result")?;
            if message.get("result").is_some() || message.get("error").is_some() {
                return Ok(message);
            }
        }
    }

    /// Reads `resp` as a stream; fails (with the body) when it is not one.
    fn open(resp: reqwest::Response) -> anyhow::Result<Self> {
        let content_type = resp.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default();
        anyhow::ensure!(
            content_type.starts_with("text/event-stream"),
            "not a stream: HTTP {} {content_type}",
            resp.status()
        );
        Ok(Self { resp, buffer: String::new() })
    }

    /// The next JSON message (comments and empty events skipped), `None` once the stream
    /// ended; waits at most `within` for it.
    pub async fn next(&mut self, within: Duration) -> anyhow::Result<Option<Value>> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")).filter(|d| !d.is_empty()) {
                    return Ok(Some(serde_json::from_str(data)?));
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk())
                .await
                .with_context(|| format!("no message within {within:?}"))??;
            match chunk {
                Some(bytes) => self.buffer.push_str(&String::from_utf8_lossy(&bytes)),
                None => return Ok(None),
            }
        }
    }
}
