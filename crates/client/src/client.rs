//! Sending MCP requests over HTTP: one POST per request, the reply read whole (bounded) or
//! handed back unread for a stream the caller reads as it comes.
//!
//! Invariant: every POST says it sends JSON and accepts JSON or an SSE stream, as Streamable
//! HTTP requires; a body is never buffered past `max_body` bytes.

use std::time::Duration;

use reqwest::header::{ACCEPT, CONTENT_TYPE, RETRY_AFTER};

use mcpgate_protocol::headers::MCP_SESSION_ID;

use crate::error::ClientError;
use crate::reply::Reply;
use crate::request::McpRequest;

/// A client of MCP endpoints (cheap to clone: the connection pool is shared). Timeouts,
/// pooling and TLS are the `reqwest::Client`'s it is made from.
#[derive(Debug, Clone)]
pub struct Client {
    http: reqwest::Client,
    max_body: usize,
}

impl Client {
    /// The largest body read by default (16 MiB).
    pub const DEFAULT_MAX_BODY: usize = 16 * 1024 * 1024;

    /// A client sending with `http`.
    pub fn new(http: reqwest::Client) -> Self {
        Self { http, max_body: Self::DEFAULT_MAX_BODY }
    }

    /// Reads no body larger than `bytes` (a larger one is [`ClientError::TooLarge`]).
    #[must_use]
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }

    /// The HTTP client underneath, for requests that are not MCP POSTs.
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// POSTs `request` to `url` and reads its reply.
    ///
    /// # Errors
    ///
    /// No response ([`ClientError::Send`]), a body that broke off ([`ClientError::Read`]) or
    /// is too large ([`ClientError::TooLarge`]). An HTTP error status is a [`Reply`].
    pub async fn send(&self, url: &str, request: &McpRequest) -> Result<Reply, ClientError> {
        let headers = request.headers().iter().map(|(k, v)| (k.as_str(), v.as_str()));
        self.post(url, headers, request.body()).await
    }

    /// POSTs a body as it is, with `headers` (besides the content type and accept headers):
    /// for requests an era's rules do not describe, such as deliberately wrong ones.
    ///
    /// # Errors
    ///
    /// As [`Client::send`].
    pub async fn post<'a>(
        &self,
        url: &str,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: String,
    ) -> Result<Reply, ClientError> {
        let response = self
            .request(url, headers, body)
            .send()
            .await
            .map_err(|source| ClientError::Send { url: url.to_owned(), source })?;
        self.read(response).await
    }

    /// POSTs `request` and hands back the response unread, for a stream read as it comes
    /// (`within`: the whole exchange's timeout, instead of the client's).
    ///
    /// # Errors
    ///
    /// No response ([`ClientError::Send`]).
    pub async fn open(
        &self,
        url: &str,
        request: &McpRequest,
        within: Option<Duration>,
    ) -> Result<reqwest::Response, ClientError> {
        let headers = request.headers().iter().map(|(k, v)| (k.as_str(), v.as_str()));
        let mut builder = self.request(url, headers, request.body());
        if let Some(within) = within {
            builder = builder.timeout(within);
        }
        builder.send().await.map_err(|source| ClientError::Send { url: url.to_owned(), source })
    }

    fn request<'a>(
        &self,
        url: &str,
        headers: impl IntoIterator<Item = (&'a str, &'a str)>,
        body: String,
    ) -> reqwest::RequestBuilder {
        let mut builder = self
            .http
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json, text/event-stream")
            .body(body);
        for (name, value) in headers {
            builder = builder.header(name, value);
        }
        builder
    }

    /// Reads a response whole, failing past `max_body`.
    async fn read(&self, mut response: reqwest::Response) -> Result<Reply, ClientError> {
        let header = |name| response.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
        let status = response.status().as_u16();
        let session = header(MCP_SESSION_ID);
        let content_type = header(CONTENT_TYPE.as_str()).unwrap_or_default();
        let retry_after = header(RETRY_AFTER.as_str());
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|source| ClientError::Read { source })? {
            if body.len() + chunk.len() > self.max_body {
                return Err(ClientError::TooLarge { max: self.max_body });
            }
            body.extend_from_slice(&chunk);
        }
        let body = String::from_utf8(body).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        Ok(Reply { status, session, content_type, retry_after, body })
    }
}
