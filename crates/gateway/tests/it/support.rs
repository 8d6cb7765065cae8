//! Test harness: build an app from a config, compose requests of either era, read replies.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Method, Request, StatusCode};
use bytes::Bytes;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use mcpgate::catalog::CatalogBuilder;
use mcpgate::{AppState, Config};

pub(crate) const MODERN: &str = "2026-07-28";
pub(crate) const ISS: &str = "https://auth.example.com";
pub(crate) const AUD: &str = "https://mcp.example.com/mcp";
pub(crate) const SECRET: &str = "0123456789abcdef0123456789abcdef-test-secret";

/// [`config`] with JWT auth accepting HS256 tokens signed with [`SECRET`].
pub(crate) fn hs256_config() -> Config {
    let mut c = config();
    c.auth.mode = mcpgate::config::AuthMode::Jwt;
    c.auth.resource = Some(AUD.to_owned());
    c.auth.authorization_servers = vec![ISS.to_owned()];
    c.auth.jwt.issuer = Some(ISS.to_owned());
    c.auth.jwt.algorithms = vec!["HS256".to_owned()];
    c.auth.jwt.hs256_secrets = vec![mcpgate::config::Secret::new(SECRET)];
    c
}

/// Valid claims for `sub`, five minutes to live.
pub(crate) fn claims(sub: &str) -> Value {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_secs();
    json!({"iss": ISS, "sub": sub, "aud": AUD, "iat": now, "exp": now + 300})
}

/// An HS256 token for `claims`.
pub(crate) fn hs(claims: &Value) -> String {
    let key = jsonwebtoken::EncodingKey::from_secret(SECRET.as_bytes());
    jsonwebtoken::encode(&jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256), claims, &key).expect("signs")
}

/// A loopback config serving both built-in toolsets (conformance first).
pub(crate) fn config() -> Config {
    Config { toolset: vec!["conformance".to_owned(), "demo".to_owned()], ..Config::default() }
}

pub(crate) async fn app(config: Config) -> Router {
    mcpgate::app(AppState::new(config).await.expect("valid state"))
}

pub(crate) async fn app_with(config: Config, extra: impl FnOnce(&mut CatalogBuilder)) -> (Router, AppState) {
    let state = AppState::with_tools(config, extra).await.expect("valid state");
    (mcpgate::app(state.clone()), state)
}

pub(crate) fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "mcpgate-tests", "version": "1.0.0"}
    })
}

/// A request under construction.
pub(crate) struct Req {
    method: Method,
    path: String,
    headers: HeaderMap,
    body: Body,
    /// The id a reader of the body finds (null when it has none or is no JSON object), which
    /// an error reply must echo once the gateway has read the body.
    id: Value,
}

/// A body for [`Req::post`]: JSON text, whose id the harness reads, or a streamed [`Body`].
pub(crate) trait PostBody {
    /// The body and the id a reader of it finds (null for a stream, which is never read here).
    fn into_parts(self) -> (Body, Value);
}

impl PostBody for String {
    fn into_parts(self) -> (Body, Value) {
        let id = serde_json::from_str::<Value>(&self).ok().and_then(|v| v.get("id").cloned()).unwrap_or(Value::Null);
        (Body::from(self), id)
    }
}

impl PostBody for &'static str {
    fn into_parts(self) -> (Body, Value) {
        self.to_owned().into_parts()
    }
}

impl PostBody for Body {
    fn into_parts(self) -> (Body, Value) {
        (self, Value::Null)
    }
}

impl Req {
    /// A POST to /mcp with a JSON body and the headers every client sends.
    pub(crate) fn post(body: impl PostBody) -> Self {
        let (body, id) = body.into_parts();
        let mut headers = HeaderMap::new();
        headers.insert("content-type", HeaderValue::from_static("application/json"));
        headers.insert("accept", HeaderValue::from_static("application/json, text/event-stream"));
        headers.insert("host", HeaderValue::from_static("localhost"));
        Self { method: Method::POST, path: "/mcp".to_owned(), headers, body, id }
    }

    pub(crate) fn get(path: &str) -> Self {
        let mut headers = HeaderMap::new();
        headers.insert("host", HeaderValue::from_static("localhost"));
        Self { method: Method::GET, path: path.to_owned(), headers, body: Body::empty(), id: Value::Null }
    }

    /// A modern request: `_meta` with no optional capabilities and all mirrored headers.
    pub(crate) fn modern(method: &str, params: Value) -> Self {
        Self::modern_with(method, params, json!({}))
    }

    /// A modern request declaring `caps`.
    pub(crate) fn modern_with(method: &str, mut params: Value, caps: Value) -> Self {
        let name =
            ["name", "uri", "taskId"].iter().find_map(|k| params.get(*k).and_then(Value::as_str).map(str::to_owned));
        let mut full = meta(caps);
        if let Some(Value::Object(extra)) = params.get("_meta").cloned() {
            for (k, v) in extra {
                full[k] = v;
            }
        }
        params["_meta"] = full;
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut req = Self::post(body.to_string()).header("mcp-protocol-version", MODERN).header("mcp-method", method);
        if let Some(name) = name {
            req = req.header("mcp-name", &name);
        }
        req
    }

    /// A legacy request, with a session id when given.
    pub(crate) fn legacy(method: &str, params: Value, session: Option<&str>) -> Self {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        let req = Self::post(body.to_string());
        match session {
            Some(s) => req.header("mcp-session-id", s).header("mcp-protocol-version", "2025-11-25"),
            None => req,
        }
    }

    /// The same request to another path (a virtual server's).
    pub(crate) fn at(mut self, path: &str) -> Self {
        path.clone_into(&mut self.path);
        self
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Self {
        let name = HeaderName::from_bytes(name.as_bytes()).expect("header name");
        self.headers.insert(name, HeaderValue::from_str(value).expect("header value"));
        self
    }

    pub(crate) fn without(mut self, name: &str) -> Self {
        self.headers.remove(name);
        self
    }

    pub(crate) fn method(mut self, method: Method) -> Self {
        self.method = method;
        self
    }

    pub(crate) fn into_request(self) -> Request<Body> {
        let mut request = Request::builder().method(self.method).uri(self.path).body(self.body).expect("request");
        *request.headers_mut() = self.headers;
        request
    }

    pub(crate) async fn send(self, app: &Router) -> Resp {
        let sent_id = self.id.clone();
        let response = tokio::time::timeout(Duration::from_secs(20), app.clone().oneshot(self.into_request()))
            .await
            .expect("answered within 20 s")
            .expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(Duration::from_secs(20), response.into_body().collect())
            .await
            .expect("body within 20 s")
            .expect("body")
            .to_bytes();
        Resp { status, headers, body, sent_id }
    }
}

/// A complete response.
#[derive(Debug)]
pub(crate) struct Resp {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// The id the request carried (null if none could be read from it).
    pub(crate) sent_id: Value,
}

impl Resp {
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub(crate) fn result(&self) -> Value {
        let json = self.json();
        assert_eq!(self.status, StatusCode::OK, "{json}");
        json.get("result").cloned().unwrap_or_else(|| panic!("no result: {json}"))
    }

    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// The `data:` payloads of an SSE body.
    pub(crate) fn sse(&self) -> Vec<Value> {
        assert_eq!(self.header("content-type"), Some("text/event-stream"));
        String::from_utf8_lossy(&self.body)
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .map(|d| serde_json::from_str(d).expect("one JSON message per data line"))
            .collect()
    }
}

/// Asserts an error response to a request the gateway read: HTTP status, JSON-RPC code, and
/// the request's id echoed; a request whose id could not be read (none, null, or no JSON) gets
/// an error without an id (README "Errors").
#[track_caller]
pub(crate) fn assert_error(resp: &Resp, status: u16, code: i64) -> Value {
    let json = error_reply(resp, status, code);
    if resp.sent_id.is_null() {
        assert!(json.get("id").is_none(), "no id to echo, yet one in {json}");
    } else {
        assert_eq!(json["id"], resp.sent_id, "the request's id echoed in {json}");
    }
    json
}

/// Asserts an error response that carries no id, whatever the body held: the request was
/// refused before its body was read (Host/Origin, authentication, content type, Accept, body
/// size or time, overload), or it was a POSTed response, which answers no request of the
/// client's. Checks HTTP status and JSON-RPC code too.
#[track_caller]
pub(crate) fn assert_error_without_id(resp: &Resp, status: u16, code: i64) -> Value {
    let json = error_reply(resp, status, code);
    assert!(json.get("id").is_none(), "no id in {json}");
    json
}

#[track_caller]
fn error_reply(resp: &Resp, status: u16, code: i64) -> Value {
    let json = resp.json();
    assert_eq!(resp.status.as_u16(), status, "status of {json}");
    assert_eq!(json["jsonrpc"], "2.0", "{json}");
    assert_eq!(json["error"]["code"], code, "code of {json}");
    assert!(json["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{json}");
    assert!(json.get("result").is_none(), "{json}");
    json
}

/// Runs `initialize` and returns the session id.
pub(crate) async fn initialize(app: &Router, version: &str) -> (String, Value) {
    let params = json!({"protocolVersion": version, "capabilities": {"elicitation": {}}, "clientInfo": {"name": "legacy", "version": "1"}});
    let resp = Req::legacy("initialize", params, None).send(app).await;
    let result = resp.result();
    let session = resp.header("mcp-session-id").expect("a session id").to_owned();
    (session, result)
}

/// A response read as it streams: SSE messages one at a time.
pub(crate) struct SseStream {
    body: Body,
    buffer: String,
}

impl SseStream {
    /// Sends `req` and returns its response stream (asserting an SSE response).
    pub(crate) async fn open(app: &Router, req: Req) -> Self {
        let response = tokio::time::timeout(Duration::from_secs(20), app.clone().oneshot(req.into_request()))
            .await
            .expect("answered within 20 s")
            .expect("infallible");
        assert_eq!(response.headers().get("content-type").and_then(|v| v.to_str().ok()), Some("text/event-stream"));
        Self { body: response.into_body(), buffer: String::new() }
    }

    /// Sends `req`: its response stream when the answer is SSE, else the whole response.
    pub(crate) async fn open_or_reply(app: &Router, req: Req) -> Result<Self, Resp> {
        let sent_id = req.id.clone();
        let response = tokio::time::timeout(Duration::from_secs(20), app.clone().oneshot(req.into_request()))
            .await
            .expect("answered within 20 s")
            .expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        if headers.get("content-type").and_then(|v| v.to_str().ok()) == Some("text/event-stream") {
            return Ok(Self { body: response.into_body(), buffer: String::new() });
        }
        let body = tokio::time::timeout(Duration::from_secs(20), response.into_body().collect())
            .await
            .expect("body within 20 s")
            .expect("body")
            .to_bytes();
        Err(Resp { status, headers, body, sent_id })
    }

    /// The next JSON message (comments and empty events skipped); `None` once the stream
    /// ended. Each wait is bounded.
    pub(crate) async fn next(&mut self) -> Option<Value> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                if let Some(data) = event.lines().find_map(|l| l.strip_prefix("data: ")).filter(|d| !d.is_empty()) {
                    return Some(serde_json::from_str(data).expect("one JSON message per event"));
                }
                continue;
            }
            let frame =
                tokio::time::timeout(Duration::from_secs(20), self.body.frame()).await.expect("a frame within 20 s");
            match frame {
                Some(Ok(frame)) => {
                    if let Some(data) = frame.data_ref() {
                        self.buffer.push_str(&String::from_utf8_lossy(data));
                    }
                }
                Some(Err(e)) => panic!("stream failed: {e}"),
                None => return None,
            }
        }
    }
}

/// A start-up error with every cause in its chain, as the binary prints it.
pub(crate) fn error_text(e: mcpgate::error::StartupError) -> String {
    let mut text = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}
