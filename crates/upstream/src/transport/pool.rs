//! HTTP/1.1 connections to one plain-`http` upstream, owned by the calls that use them: a call
//! takes an idle connection (or opens one), drives it itself while its request goes out and its
//! answer comes back, and puts it back once the answer was read to its end. No task per
//! connection and no channel hop between a call and its connection's driver: the one task that
//! waits for the answer also does the connection's reads and writes (hyper's
//! `client::conn::http1`, polled in place), which is what a federated call costs least with.
//!
//! Invariants: at most `max_idle` idle connections are kept, none reused after `idle_timeout`
//! (an expired one is closed when the pool is next used: taken from or given back to);
//! a connection whose answer was not read to its end (a call dropped or cancelled, a body over
//! its bound) is closed, never reused, and so is one whose answer was not the answer to its
//! request (another id: `Answer::discard`, since what it carries may be meant for another
//! request); a request a kept connection could not take (the upstream
//! had closed it meanwhile) goes out once more on a new connection — only a request hyper gives
//! back unsent, so nothing ever runs twice; opening a connection takes at most `connect_timeout`
//! and is made as the general client makes one (hyper-util's `HttpConnector`: every resolved
//! address tried, the other family after 300 ms, TCP keepalive and `TCP_USER_TIMEOUT`, so a
//! dead peer under a kept connection is noticed in about 30 s, not at the call's timeout); a
//! URL with credentials in it (`user:pw@`) is left to the general client, which sends them.

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::{Body, Incoming};
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use reqwest::StatusCode;
use reqwest::header::{HOST, HeaderMap, HeaderValue};
use tokio::net::TcpStream;
use tokio::time::Instant;
use tower::Service as _;

use crate::error::{Cause, UpstreamError, cause};

/// TCP keepalive idle time and probe interval (three probes), as the general client sets them.
const KEEPALIVE: Duration = Duration::from_secs(15);
/// How long data written may stay unacknowledged before the kernel gives the connection up.
#[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(30);

/// One kept-alive connection: the handle requests are sent with and the state machine that
/// reads and writes its socket (polled by whoever holds it).
struct Conn {
    send: SendRequest<Full<Bytes>>,
    driver: Connection<TokioIo<TcpStream>, Full<Bytes>>,
    /// When it was last put back (idle connections older than the pool's limit are closed).
    since: Instant,
}

impl Conn {
    /// Whether it can take a request now: its driver is polled once (it notices a close by the
    /// upstream, and readies itself for the next request after an answer read to its end).
    fn usable(&mut self) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if Pin::new(&mut self.driver).poll(&mut cx).is_ready() {
            return false;
        }
        matches!(self.send.poll_ready(&mut cx), Poll::Ready(Ok(())))
    }
}

/// The connections of one upstream.
pub(crate) struct Pool {
    /// `http://host:port`, what the connector resolves and connects to.
    address: hyper::Uri,
    /// Opens connections (resolution, address order, socket options).
    connector: HttpConnector,
    /// The endpoint's path and query: the request target.
    origin_form: hyper::Uri,
    /// The `Host` header of every request (the general client adds it itself; a connection
    /// driven in place does not).
    host: HeaderValue,
    /// Boxed: a connection's state is large (kB), and moves between this list and the
    /// futures of the calls that drive it.
    #[expect(clippy::vec_box, reason = "connections move in and out; a box moves as a pointer")]
    idle: Mutex<Vec<Box<Conn>>>,
    max_idle: usize,
    idle_timeout: Duration,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool").field("address", &self.address).finish_non_exhaustive()
    }
}

impl Pool {
    /// A pool for `url`, when it is a plain `http` URL (`None` otherwise: https and anything
    /// else go through the general client; `Err`: what it names no valid one of (request
    /// target or host), and why).
    pub(crate) fn for_url(
        url: &reqwest::Url,
        max_idle: usize,
        idle_timeout: Duration,
        connect_timeout: Duration,
    ) -> Result<Option<Self>, (&'static str, Cause)> {
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else { return Ok(None) };
        // Credentials in the URL become the general client's `Authorization: Basic`.
        if url.scheme() != "http" || !url.username().is_empty() || url.password().is_some() {
            return Ok(None);
        }
        let target = match url.query() {
            Some(query) => format!("{}?{query}", url.path()),
            None => url.path().to_owned(),
        };
        let origin_form = hyper::Uri::try_from(target).map_err(|e| ("not a valid request target", cause(e)))?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let address =
            hyper::Uri::try_from(format!("http://{host}:{port}")).map_err(|e| ("not a valid host", cause(e)))?;
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(connect_timeout));
        connector.set_nodelay(true);
        connector.set_keepalive(Some(KEEPALIVE));
        connector.set_keepalive_interval(Some(KEEPALIVE));
        connector.set_keepalive_retries(Some(3));
        #[cfg(any(target_os = "android", target_os = "fuchsia", target_os = "linux"))]
        connector.set_tcp_user_timeout(Some(TCP_USER_TIMEOUT));
        Ok(Some(Self {
            address,
            connector,
            origin_form,
            host: HeaderValue::try_from(authority).map_err(|e| ("not a valid host", cause(e)))?,
            idle: Mutex::new(Vec::new()),
            max_idle: max_idle.max(1),
            idle_timeout,
            connect_timeout,
        }))
    }

    /// POSTs `body` with `headers` (`Host` is added) and returns the answer's head; its body is
    /// read from the returned [`Answer`], which gives the connection back when read to its end.
    /// `Err`: the upstream is unreachable (the error names no URL: it may carry a credential).
    pub(crate) async fn post(&self, mut headers: HeaderMap, body: Vec<u8>) -> Result<Answer<'_>, UpstreamError> {
        headers.insert(HOST, self.host.clone());
        let mut request = hyper::Request::new(Full::new(Bytes::from(body)));
        *request.method_mut() = hyper::Method::POST;
        *request.uri_mut() = self.origin_form.clone();
        *request.headers_mut() = headers;
        let mut conn = match self.take() {
            Some(conn) => conn,
            // Boxed (here and below): opening is rare, and a call's future should not carry it.
            None => Box::pin(self.open()).await?,
        };
        for fresh in [false, true] {
            let outcome = exchange(&mut conn, request).await;
            match outcome {
                Ok((response, driver_done)) => {
                    let (head, body) = response.into_parts();
                    return Ok(Answer {
                        pool: self,
                        conn: (!driver_done).then_some(conn),
                        ended: false,
                        status: head.status,
                        headers: head.headers,
                        body,
                    });
                }
                Err(mut e) => match e.take_message() {
                    // Never written: the kept connection was closed under it. Once more, anew.
                    Some(unsent) if !fresh => {
                        request = unsent;
                        conn = Box::pin(self.open()).await?;
                    }
                    _ => return Err(unreachable(e.into_error())),
                },
            }
        }
        Err(UpstreamError::unreachable("the upstream closed a new connection before taking the request"))
    }

    /// The most recently used idle connection that can still take a request (expired ones
    /// are closed on the way).
    fn take(&self) -> Option<Box<Conn>> {
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        let timeout = self.idle_timeout;
        idle.retain(|c| now.saturating_duration_since(c.since) < timeout);
        while let Some(mut conn) = idle.pop() {
            if conn.usable() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps a connection whose answer was read to its end, within the bounds.
    fn put(&self, mut conn: Box<Conn>) {
        let now = Instant::now();
        conn.since = now;
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        let timeout = self.idle_timeout;
        idle.retain(|c| now.saturating_duration_since(c.since) < timeout);
        if idle.len() < self.max_idle {
            idle.push(conn);
        }
    }

    async fn open(&self) -> Result<Box<Conn>, UpstreamError> {
        let connect = async {
            let io = self.connector.clone().call(self.address.clone()).await.map_err(unreachable)?;
            http1::handshake(io).await.map_err(unreachable)
        };
        let (send, driver) = tokio::time::timeout(self.connect_timeout, connect).await.map_err(|_| {
            UpstreamError::unreachable(format!("no connection within {} s", self.connect_timeout.as_secs()))
        })??;
        Ok(Box::new(Conn { send, driver, since: Instant::now() }))
    }
}

/// Sends a request on `conn`, driving it until the answer's head came (`true` with it: the
/// connection ended meanwhile, as after a `Connection: close` answer).
async fn exchange(
    conn: &mut Conn,
    request: hyper::Request<Full<Bytes>>,
) -> Result<(hyper::Response<Incoming>, bool), hyper::client::conn::TrySendError<hyper::Request<Full<Bytes>>>> {
    let sent = conn.send.try_send_request(request);
    let mut sent = std::pin::pin!(sent);
    let mut driver_done = false;
    let driver = &mut conn.driver;
    let response = poll_fn(|cx| {
        // The driver first: it writes the request and reads the answer, which the response
        // future then picks up without waiting for another wake.
        if !driver_done && Pin::new(&mut *driver).poll(cx).is_ready() {
            driver_done = true;
        }
        sent.as_mut().poll(cx)
    })
    .await?;
    Ok((response, driver_done))
}

/// Unreachable because of `e` (a connection's error: it alone says why).
fn unreachable(e: impl std::error::Error + Send + Sync + 'static) -> UpstreamError {
    UpstreamError::Unreachable { detail: None, source: Some(cause(e)) }
}

/// An answer from a pooled connection: its head, and its body read chunk by chunk while the
/// connection is driven; the connection goes back to the pool when the answer is dropped
/// after its body ended (not before: its reader may still find it is not the answer it
/// waited for, and [`Answer::discard`] it).
pub(crate) struct Answer<'a> {
    pool: &'a Pool,
    /// `None` once the connection ended (the body may still hold what it read), or was
    /// discarded.
    conn: Option<Box<Conn>>,
    /// The body was read to its end.
    ended: bool,
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    body: Incoming,
}

impl Answer<'_> {
    /// The next piece of the body; `None` at its end (the connection is then kept).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, Cause> {
        loop {
            let (conn, body) = (&mut self.conn, &mut self.body);
            let frame = poll_fn(|cx| {
                if let Some(c) = conn.as_mut()
                    && Pin::new(&mut c.driver).poll(cx).is_ready()
                {
                    *conn = None;
                }
                Pin::new(&mut *body).poll_frame(cx)
            })
            .await;
            match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) if data.is_empty() => {}
                    Ok(data) => return Ok(Some(data)),
                    Err(_trailers) => {}
                },
                Some(Err(e)) => {
                    self.conn = None;
                    return Err(cause(e));
                }
                None => {
                    self.ended = true;
                    return Ok(None);
                }
            }
        }
    }
}

impl Answer<'_> {
    /// Closes the connection instead of keeping it: the answer was not the one its request
    /// waited for, so the connection cannot be trusted to carry the next one.
    pub(crate) fn discard(&mut self) {
        self.conn = None;
    }
}

impl Drop for Answer<'_> {
    fn drop(&mut self) {
        // An empty body (a 202) needs no reading to be over; any other unread one closes the
        // connection (dropped with it), since what is left of it would be read as the next answer.
        if let Some(conn) = self.conn.take()
            && (self.ended || self.body.is_end_stream())
        {
            self.pool.put(conn);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Pool;

    fn pooled(url: &str) -> bool {
        let url = reqwest::Url::parse(url).expect("a URL");
        Pool::for_url(&url, 4, Duration::from_secs(60), Duration::from_secs(5)).expect("valid").is_some()
    }

    #[test]
    fn only_plain_http_urls_without_credentials_are_pooled() {
        assert!(pooled("http://127.0.0.1:8080/mcp?x=1"));
        assert!(pooled("http://[::1]:8080/mcp"));
        assert!(pooled("http://upstream.internal/mcp"));
        // The general client: TLS, and credentials it turns into `Authorization: Basic`.
        assert!(!pooled("https://upstream.example/mcp"));
        assert!(!pooled("http://svc:secret@10.0.0.5/mcp"));
        assert!(!pooled("http://svc@10.0.0.5/mcp"));
    }
}
