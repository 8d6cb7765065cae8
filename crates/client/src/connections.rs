//! A lean transport for one plain-`http://` endpoint: keep-alive HTTP/1.1 connections on
//! hyper's low-level client, each driven by the request that holds it (no connection task,
//! no redirect or retry layers, the URL parsed once), for callers that send many small
//! requests and count their own CPU, such as the load generator.
//!
//! Invariants: a connection serves one request at a time and goes back to the idle stack only
//! after its reply was read whole; a request is re-sent on a fresh connection only when hyper
//! hands it back unsent (the idle connection had closed), never once any of it may have
//! reached the server; every exchange is bounded in time and no body is buffered past
//! `max_body` bytes.

use std::future::{Future as _, poll_fn};
use std::pin::{Pin, pin};
use std::sync::Mutex;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full, LengthLimitError, Limited};
use hyper::client::conn::http1;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST, HeaderName, HeaderValue, RETRY_AFTER};
use hyper::{Method, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use mcpgate_protocol::headers::MCP_SESSION_ID;

use crate::error::ClientError;
use crate::reply::Reply;
use crate::request::McpRequest;

/// One keep-alive connection and the future that drives it.
struct Conn {
    sender: http1::SendRequest<Full<Bytes>>,
    driver: Pin<Box<http1::Connection<TokioIo<TcpStream>, Full<Bytes>>>>,
}

/// Keep-alive HTTP/1.1 connections to one `http://` MCP endpoint (share it by reference or in
/// an `Arc`: the idle connections are shared).
pub struct Connections {
    url: String,
    /// `host:port` to connect to.
    address: String,
    host: HeaderValue,
    path: Uri,
    idle: Mutex<Vec<Conn>>,
    max_idle: usize,
    max_body: usize,
    timeout: Duration,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Connections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connections").field("url", &self.url).field("max_idle", &self.max_idle).finish_non_exhaustive()
    }
}

impl Connections {
    /// Connections to `url`, which must be `http://host[:port]/path`; `None` for any other
    /// URL (say, `https://`: use a [`Client`](crate::client::Client) for it). Defaults: 8 idle
    /// connections kept, 16 MiB bodies, 120 s per exchange, 5 s to connect.
    pub fn new(url: &str) -> Option<Self> {
        let parsed = reqwest::Url::parse(url).ok()?;
        if parsed.scheme() != "http" || parsed.username() != "" || parsed.password().is_some() {
            return None;
        }
        let host = parsed.host_str()?;
        let port = parsed.port_or_known_default()?;
        // An IPv6 literal keeps its brackets, in the address and in `Host`.
        let authority = match parsed.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let path = match parsed.query() {
            Some(query) => format!("{}?{query}", parsed.path()),
            None => parsed.path().to_owned(),
        };
        Some(Self {
            url: url.to_owned(),
            address: format!("{host}:{port}"),
            host: HeaderValue::from_str(&authority).ok()?,
            path: path.parse().ok()?,
            idle: Mutex::new(Vec::new()),
            max_idle: 8,
            max_body: crate::client::Client::DEFAULT_MAX_BODY,
            timeout: Duration::from_secs(120),
            connect_timeout: Duration::from_secs(5),
        })
    }

    /// Keeps up to `n` idle connections (one per concurrent sender is enough).
    #[must_use]
    pub fn max_idle(mut self, n: usize) -> Self {
        self.max_idle = n;
        self
    }

    /// Reads no body larger than `bytes` (a larger one is [`ClientError::TooLarge`]).
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// Bounds each exchange (connecting included) to `timeout`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Bounds connecting to `timeout`.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// POSTs `request` and reads its reply whole, as [`Client::send`](crate::client::Client::send)
    /// does.
    ///
    /// # Errors
    ///
    /// No connection or no reply ([`ClientError::Exchange`]), none in time
    /// ([`ClientError::TimedOut`]), or a body too large ([`ClientError::TooLarge`]). An HTTP
    /// error status is a [`Reply`].
    pub async fn send(&self, request: &McpRequest) -> Result<Reply, ClientError> {
        let mut http = Request::new(Full::new(Bytes::from(request.body())));
        *http.method_mut() = Method::POST;
        *http.uri_mut() = self.path.clone();
        let headers = http.headers_mut();
        headers.insert(HOST, self.host.clone());
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        for (name, value) in request.headers() {
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|e| self.failed(e))?;
            let value = HeaderValue::from_str(value).map_err(|e| self.failed(e))?;
            headers.append(name, value);
        }
        match tokio::time::timeout(self.timeout, self.exchange(http)).await {
            Ok(reply) => reply,
            Err(_) => Err(ClientError::TimedOut { url: self.url.clone(), secs: self.timeout.as_secs() }),
        }
    }

    async fn exchange(&self, mut request: Request<Full<Bytes>>) -> Result<Reply, ClientError> {
        loop {
            let (conn, reused) = match self.take_idle() {
                Some(conn) => (conn, true),
                None => (self.connect().await?, false),
            };
            let Conn { mut sender, driver } = conn;
            let mut driver = Some(driver);
            let sending = sender.try_send_request(request);
            let mut read = pin!(async {
                let response = sending.await.map_err(ReadError::Send)?;
                let (parts, body) = response.into_parts();
                let body = Limited::new(body, self.max_body).collect().await.map_err(ReadError::Body)?;
                Ok::<_, ReadError>((parts, body.to_bytes()))
            });
            let mut ended = None;
            // The request is read while its connection is driven, in this task. Should the
            // connection end first (say, after a `Connection: close` reply), it is dropped,
            // which settles the request: with what was read, or with an error.
            let outcome = poll_fn(|cx| {
                if let Poll::Ready(outcome) = read.as_mut().poll(cx) {
                    return Poll::Ready(outcome);
                }
                if let Some(Poll::Ready(end)) = driver.as_mut().map(|d| d.as_mut().poll(cx)) {
                    ended = Some(end);
                    driver = None;
                    return read.as_mut().poll(cx);
                }
                Poll::Pending
            })
            .await;
            match outcome {
                Ok((parts, body)) => {
                    let keep = parts.headers.get(hyper::header::CONNECTION).is_none_or(|v| v != "close");
                    if let Some(driver) = driver.filter(|_| keep) {
                        self.put_idle(Conn { sender, driver });
                    }
                    return Ok(reply(parts, body));
                }
                // An idle connection the server had closed: the request never left, so it
                // goes again on a fresh one.
                Err(ReadError::Send(mut unsent)) if reused => match unsent.take_message() {
                    Some(message) => request = message,
                    None => return Err(self.failed(unsent.into_error())),
                },
                Err(ReadError::Send(unsent)) => return Err(self.failed(unsent.into_error())),
                Err(ReadError::Body(e)) if e.downcast_ref::<LengthLimitError>().is_some() => {
                    return Err(ClientError::TooLarge { max: self.max_body });
                }
                Err(ReadError::Body(e)) => match ended {
                    Some(Err(ended)) => return Err(self.failed(ended)),
                    _ => return Err(self.failed(e)),
                },
            }
        }
    }

    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(conn) = idle.pop() {
            if !conn.sender.is_closed() {
                return Some(conn);
            }
        }
        None
    }

    fn put_idle(&self, conn: Conn) {
        let mut idle = self.idle.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    async fn connect(&self) -> Result<Conn, ClientError> {
        let stream = match tokio::time::timeout(self.connect_timeout, TcpStream::connect(&self.address)).await {
            Ok(stream) => stream.map_err(|e| self.failed(e))?,
            Err(_) => {
                return Err(ClientError::TimedOut { url: self.url.clone(), secs: self.connect_timeout.as_secs() });
            }
        };
        // Small requests and replies: send each at once.
        stream.set_nodelay(true).map_err(|e| self.failed(e))?;
        let (sender, driver) = http1::handshake(TokioIo::new(stream)).await.map_err(|e| self.failed(e))?;
        Ok(Conn { sender, driver: Box::pin(driver) })
    }

    fn failed(&self, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> ClientError {
        ClientError::Exchange { url: self.url.clone(), source: source.into() }
    }
}

/// Why an exchange on one connection failed.
#[allow(clippy::large_enum_variant)] // lives for one exchange; the unsent request is kept whole
enum ReadError {
    /// No response head (hyper hands back a request it did not send).
    Send(hyper::client::conn::TrySendError<Request<Full<Bytes>>>),
    /// The body broke off or was too large.
    Body(Box<dyn std::error::Error + Send + Sync>),
}

fn reply(parts: hyper::http::response::Parts, body: Bytes) -> Reply {
    let header = |name: &str| parts.headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let body = match String::from_utf8(body.into()) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Reply {
        status: parts.status.as_u16(),
        session: header(MCP_SESSION_ID),
        content_type: header(CONTENT_TYPE.as_str()).unwrap_or_default(),
        retry_after: header(RETRY_AFTER.as_str()),
        body,
    }
}
