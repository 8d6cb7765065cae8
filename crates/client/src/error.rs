//! The one error type of the client crate: why a request got no reply that could be read.
//! Each failure keeps what reqwest, hyper or the JSON parser said as its source.

/// Why a request got no reply that could be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The request was not sent, or no response came (connection refused or reset, timeout).
    #[error("POST {url}: {source}")]
    Send {
        /// Where it went.
        url: String,
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The response started but its body could not be read to the end.
    #[error("reading the reply: {source}")]
    Read {
        /// What reqwest said.
        #[source]
        source: reqwest::Error,
    },
    /// The body is larger than the client accepts.
    #[error("the reply is larger than {max} bytes")]
    TooLarge {
        /// The client's `max_body`.
        max: usize,
    },
    /// A `Connections` exchange failed: no connection, or none that carried the reply.
    #[error("POST {url}: {source}")]
    Exchange {
        /// Where it went.
        url: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A `Connections` exchange (or its connecting) took longer than allowed.
    #[error("POST {url}: no reply within {secs} s")]
    TimedOut {
        /// Where it went.
        url: String,
        /// The bound.
        secs: u64,
    },
    /// The body is not the JSON it should be.
    #[error("not JSON ({source}): {body}")]
    NotJson {
        /// The body, clipped.
        body: String,
        /// What the parser said.
        #[source]
        source: serde_json::Error,
    },
}
