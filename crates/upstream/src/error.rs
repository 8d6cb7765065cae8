//! The one error type of the upstream crate. Texts may reach clients (inside an `isError`
//! tool result naming the upstream), so they never carry header or environment values.
//!
//! Each variant's `Display` says what failed at its level; the error behind it, when another
//! component said why, is its `source` (kept, not flattened into text). What a client sees is
//! [`UpstreamError::client_text`]: the variant and its causes in one line, each once — the
//! text the crate's errors have always shown. No kept cause names a URL (reqwest errors are
//! kept [`without_url`](reqwest::Error::without_url): a query or userinfo may carry a
//! credential), a header or a token.

use std::sync::Arc;

/// The error behind an [`UpstreamError`], shared so the error stays `Clone` (one outcome may
/// reach several waiters, and the breaker and the stats keep what they saw).
pub type Cause = Arc<dyn std::error::Error + Send + Sync>;

/// What can go wrong configuring or talking to an upstream.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// The configuration of an upstream is invalid (stops start-up).
    #[error("upstream {upstream:?}: {key}: {problem}")]
    Config {
        /// The upstream's name (or its position when it has none).
        upstream: String,
        /// The offending key.
        key: String,
        /// What is wrong.
        problem: String,
        /// The error that said so (a URL or file that does not parse, a client that cannot be
        /// built), if another component did.
        #[source]
        source: Option<Cause>,
    },
    /// The upstream could not be reached or its process could not be started.
    #[error("cannot reach it{}", detail.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    Unreachable {
        /// Why, in our words (`None`: the cause alone says it, as a refused connection does).
        detail: Option<String>,
        /// The error that made it unreachable (a connection's or the process start's).
        #[source]
        source: Option<Cause>,
    },
    /// The upstream took longer than its call timeout.
    #[error("no answer within {secs} s")]
    Timeout {
        /// The timeout.
        secs: u64,
    },
    /// The circuit breaker is open after consecutive failures.
    #[error("unavailable after {failures} consecutive failures; retrying in {retry_in_secs} s")]
    CircuitOpen {
        /// Consecutive failures that opened it.
        failures: u32,
        /// Seconds until the next probe.
        retry_in_secs: u64,
    },
    /// The upstream answered with something that is not a valid MCP message.
    #[error("invalid answer: {detail}")]
    Protocol {
        /// What was wrong with it.
        detail: String,
        /// The parser's error, if one said so.
        #[source]
        source: Option<Cause>,
    },
    /// The upstream answered with a JSON-RPC error.
    #[error("error {code}: {message}")]
    Rpc {
        /// The JSON-RPC code.
        code: i64,
        /// Its message (the upstream's text).
        message: String,
    },
    /// The upstream process exited or the connection closed mid-call.
    #[error("connection lost: {detail}")]
    Closed {
        /// What happened.
        detail: String,
        /// The connection's error, if one ended it.
        #[source]
        source: Option<Cause>,
    },
    /// The call was cancelled by the client.
    #[error("cancelled")]
    Cancelled,
    /// The token endpoint refused to exchange the caller's token (an RFC 6749 §5.2 error
    /// answer): the upstream was not called. The description is the endpoint's own text,
    /// clipped, with the caller's token cut out should the endpoint have echoed it.
    #[error(
        "token exchange refused by the authorization server: {error}{}",
        .description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    TokenExchangeRefused {
        /// The OAuth error code (`invalid_grant`, `invalid_client`, `invalid_target`, …).
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The token exchange could not be made: the endpoint was unreachable, too slow, or its
    /// answer unusable. The upstream was not called.
    #[error("token exchange failed: {detail}")]
    TokenExchangeFailed {
        /// What went wrong (never a token).
        detail: String,
        /// The error reaching the token endpoint, if one said why.
        #[source]
        source: Option<Cause>,
    },
    /// The upstream takes only exchanged tokens and the request carries no caller token to
    /// exchange (an anonymous caller, or a task run rebuilt from its record).
    #[error(
        "token exchange needs the caller's bearer token, and this request carries none (the upstream is never \
         called without one)"
    )]
    NoCallerToken,
    /// An authorization server refused a code or refresh token (an RFC 6749 §5.2 error
    /// answer, e.g. `invalid_grant`: spent, revoked or expired). Its description is the
    /// server's own text, clipped.
    #[error(
        "the authorization server refused: {error}{}",
        .description.as_deref().map(|d| format!(" ({d})")).unwrap_or_default()
    )]
    AuthorizationRefused {
        /// The OAuth error code.
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// Authorizing with a protected upstream on a user's behalf failed (discovery of its
    /// authorization server, or the server's answers). The text names what, never a token.
    #[error("authorization with the upstream failed: {detail}")]
    Authorization {
        /// What went wrong.
        detail: String,
        /// The error behind it (an authorization server out of reach, a URL that does not
        /// parse), if another component said why.
        #[source]
        source: Option<Cause>,
    },
    /// An `auth = "oauth"` upstream refused the token sent for the caller (HTTP 401: invalid,
    /// expired or revoked; 403: more scopes needed), with its `WWW-Authenticate` challenge.
    #[error("the upstream refused the caller's token (HTTP {status})")]
    TokenRefused {
        /// 401 or 403.
        status: u16,
        /// Its `Bearer` challenge, if it sent one.
        challenge: Option<crate::oauth::BearerChallenge>,
    },
    /// An `auth = "oauth"` upstream, and the caller has no usable connection to it (never
    /// connected, refresh refused, revoked, or more scopes needed): the caller must open `url`
    /// (the gateway's sealed, single-use connect link, bound to them) and call again.
    #[error("connect your account at {upstream} first: open {url}")]
    ConnectionRequired {
        /// The upstream's name.
        upstream: String,
        /// The connect link.
        url: String,
        /// Names this request for a connection (a URL elicitation's `elicitationId`).
        elicitation_id: String,
    },
}

impl UpstreamError {
    /// The text a client sees (inside an `isError` result naming the upstream, or quoted by
    /// the gateway's own messages): this error and its causes, each once.
    pub fn client_text(&self) -> String {
        chain_text(self)
    }

    /// Unreachable, said in our own words.
    pub(crate) fn unreachable(detail: impl Into<String>) -> Self {
        Self::Unreachable { detail: Some(detail.into()), source: None }
    }

    /// An invalid answer, said in our own words.
    pub(crate) fn protocol(detail: impl Into<String>) -> Self {
        Self::Protocol { detail: detail.into(), source: None }
    }

    /// A lost connection, said in our own words.
    pub(crate) fn closed(detail: impl Into<String>) -> Self {
        Self::Closed { detail: detail.into(), source: None }
    }

    /// A failed authorization, said in our own words.
    pub(crate) fn authorization(detail: impl Into<String>) -> Self {
        Self::Authorization { detail: detail.into(), source: None }
    }

    /// Whether this failure says something about the upstream's health (counts toward the
    /// circuit breaker); an error answer or a cancellation does not.
    pub fn is_health_failure(&self) -> bool {
        matches!(self, Self::Unreachable { .. } | Self::Timeout { .. } | Self::Closed { .. } | Self::Protocol { .. })
    }

    /// A short label for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Config { .. } => "config",
            Self::Unreachable { .. } => "unreachable",
            Self::Timeout { .. } => "timeout",
            Self::CircuitOpen { .. } => "circuit_open",
            Self::Protocol { .. } => "protocol",
            Self::Rpc { .. } => "rpc",
            Self::Closed { .. } => "closed",
            Self::Cancelled => "cancelled",
            Self::TokenExchangeRefused { .. } | Self::TokenExchangeFailed { .. } | Self::NoCallerToken => {
                "token_exchange"
            }
            Self::Authorization { .. }
            | Self::AuthorizationRefused { .. }
            | Self::ConnectionRequired { .. }
            | Self::TokenRefused { .. } => "authorization",
        }
    }
}

/// An error with its causes, each once (many repeat their cause's text in their own):
/// "error sending request: client error (Connect): tcp connect error: Connection refused".
pub(crate) fn chain_text(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// An error kept as a [`Cause`].
pub(crate) fn cause(e: impl std::error::Error + Send + Sync + 'static) -> Cause {
    Arc::new(e)
}

/// A reqwest error kept as a [`Cause`], without the URL it names (its query or userinfo may
/// carry a credential).
pub(crate) fn unlocated(e: reqwest::Error) -> Cause {
    Arc::new(e.without_url())
}

/// A reqwest error with its causes, without the URL it names (its query or userinfo may carry
/// a credential).
pub(crate) fn describe(e: reqwest::Error) -> String {
    chain_text(&e.without_url())
}
