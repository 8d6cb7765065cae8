//! A small MCP-over-HTTP client for tests: modern and legacy requests with the headers each
//! era requires, replies read as JSON or SSE.

use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

/// An HTTP client with bounded timeouts.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
}

/// A reply: status, headers and body.
#[derive(Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `Mcp-Session-Id`, if any.
    pub session: Option<String>,
    /// `Content-Type`.
    pub content_type: String,
    /// `Retry-After`, if any.
    pub retry_after: Option<String>,
    /// The body.
    pub body: String,
}

impl Reply {
    /// The body as JSON.
    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_str(&self.body).with_context(|| format!("not JSON: {}", self.body))
    }

    /// The `data:` messages of an SSE body.
    pub fn events(&self) -> anyhow::Result<Vec<Value>> {
        self.body.lines().filter_map(|l| l.strip_prefix("data: ")).map(|d| Ok(serde_json::from_str(d)?)).collect()
    }
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
        Ok(Self { http })
    }

    /// POSTs a raw body with the given headers.
    pub async fn post(&self, url: &str, headers: &[(&str, &str)], body: String) -> anyhow::Result<Reply> {
        let mut req = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.with_context(|| format!("POST {url}"))?;
        let status = resp.status().as_u16();
        let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let session = header("mcp-session-id");
        let content_type = header("content-type").unwrap_or_default();
        let retry_after = header("retry-after");
        let body = resp.text().await.context("reading the body")?;
        Ok(Reply { status, session, content_type, retry_after, body })
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
        let (headers, body) = modern_request(method, params);
        let mut headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        headers.extend_from_slice(extra);
        self.post(url, &headers, body).await
    }

    /// A modern request whose SSE reply is read as it streams (`subscriptions/listen`).
    pub async fn modern_stream(&self, url: &str, method: &str, params: Value) -> anyhow::Result<EventStream> {
        let (headers, body) = modern_request(method, params);
        let mut req = self
            .http
            .post(url)
            .timeout(Duration::from_secs(600))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        for (k, v) in &headers {
            req = req.header(*k, v);
        }
        EventStream::open(req.send().await.with_context(|| format!("POST {url}"))?)
    }

    /// A 2025-11-25 session's GET stream.
    pub async fn get_stream(&self, url: &str, session: &str) -> anyhow::Result<EventStream> {
        let req = self
            .http
            .get(url)
            .timeout(Duration::from_secs(600))
            .header("accept", "text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25");
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
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let mut headers = extra.to_vec();
        if let Some(s) = session {
            headers.extend([("mcp-session-id", s), ("mcp-protocol-version", "2025-11-25")]);
        }
        self.post(url, &headers, body).await
    }

    /// A legacy request whose SSE reply is read as it streams.
    pub async fn legacy_stream(
        &self,
        url: &str,
        method: &str,
        params: Value,
        session: &str,
    ) -> anyhow::Result<EventStream> {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
        let resp = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-11-25")
            .body(body)
            .send()
            .await
            .with_context(|| format!("POST {url}"))?;
        EventStream::open(resp)
    }

    /// GET a path.
    pub async fn get(&self, url: &str) -> anyhow::Result<(u16, String)> {
        let resp = self.http.get(url).send().await.with_context(|| format!("GET {url}"))?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await?))
    }
}

/// The headers and body of a modern request: `_meta` with the protocol version and no client
/// capabilities unless `params._meta` adds some, `Mcp-Method`, and `Mcp-Name` from the body.
fn modern_request(method: &str, mut params: Value) -> (Vec<(&'static str, String)>, String) {
    let name = ["name", "uri", "taskId"].iter().find_map(|k| params.get(*k).and_then(Value::as_str).map(str::to_owned));
    let extra = params.get("_meta").cloned();
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    if let Some(Value::Object(extra)) = extra {
        for (k, v) in extra {
            params["_meta"][k] = v;
        }
    }
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let mut headers = vec![("mcp-protocol-version", "2026-07-28".to_owned()), ("mcp-method", method.to_owned())];
    if let Some(name) = name {
        headers.push(("mcp-name", name));
    }
    (headers, body)
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
        let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default();
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
