//! The gateway crate's errors — `GatewayError` for a request, `StartupError` for loading the
//! configuration and building a replica — and the one place where an error becomes an HTTP
//! status, a JSON-RPC error object and response headers.
//!
//! Invariants: the client-facing message of an error never carries internal detail (that goes
//! to the log through `detail` fields and `source` causes); every response to a request whose
//! id could be read echoes that id; the status of an error depends only on the error and the
//! request's era. A start-up error never reaches a client: it stops the replica.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::jsonrpc::ErrorResponse;
use mcpgate_protocol::{Era, ErrorCode, ErrorObject, ProtocolError, ProtocolVersion, RequestId};
use mcpgate_runtime::RuntimeError;
use mcpgate_runtime::catalog::Failure;

/// Whole seconds of a `Retry-After`: rounded up, at least 1.
fn retry_after_secs(wait: &std::time::Duration) -> u64 {
    wait.as_secs().saturating_add(u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// What a caller at a quota can do.
fn quota_advice(retry_after: &Option<std::time::Duration>) -> String {
    match retry_after {
        Some(wait) => format!("the oldest expires in {} s", retry_after_secs(wait)),
        None => "retry once one of them ends".to_owned(),
    }
}

/// The cause of an error, kept for the log and for `{:#}` chains.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What stops a replica from starting: a configuration that does not load or validate, or a
/// part of the state (sealer, authenticator, store, upstreams, catalog, logger) that cannot be
/// built. Its `Display` names the setting or the step; the cause, when there is one, is the
/// `source` (shown by `{:#}` and by the binary's exit message).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// A setting is missing, malformed or inconsistent.
    #[error("invalid setting {setting}: {problem}")]
    Config {
        /// The setting (TOML key and environment twin) or source.
        setting: String,
        /// What is wrong, never including a secret value.
        problem: String,
        /// The error that said so, if another component did (never one carrying a secret).
        #[source]
        source: Option<BoxError>,
    },
    /// A start-up step failed (key files, JWKS, store, upstreams, logger).
    #[error("{what}: {problem}")]
    Step {
        /// What was being done.
        what: String,
        /// What went wrong.
        problem: String,
        /// The error that said so, if another component did.
        #[source]
        source: Option<BoxError>,
    },
    /// A tool, prompt or resource could not be registered.
    #[error(transparent)]
    Runtime {
        /// What the runtime said.
        #[from]
        source: RuntimeError,
    },
}

impl StartupError {
    /// An invalid setting, said in our own words.
    pub fn config(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Config { setting: setting.into(), problem: problem.into(), source: None }
    }

    /// The same error, its setting named as part of `outer` (a rule of a `[[server]]` table:
    /// `server "ops" policy rule "x"`).
    pub fn within(self, outer: &str) -> Self {
        match self {
            Self::Config { setting, problem, source } => {
                Self::Config { setting: format!("{outer} {setting}"), problem, source }
            }
            other => other,
        }
    }

    /// An invalid setting another component refused: `problem` says what, `source` why.
    pub fn config_caused(setting: impl Into<String>, problem: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Config { setting: setting.into(), problem: problem.into(), source: Some(source.into()) }
    }

    /// A failed start-up step, said in our own words.
    pub fn step(what: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Step { what: what.into(), problem: problem.into(), source: None }
    }

    /// A start-up step another component failed: `problem` says what, `source` why.
    pub fn step_caused(what: impl Into<String>, problem: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Step { what: what.into(), problem: problem.into(), source: Some(source.into()) }
    }
}

/// Why a step of connecting a user's account at an upstream (in their browser) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// A link or `state` that does not open: tampered, expired, or not the gateway's.
    InvalidLink,
    /// A link or `state` presented a second time.
    Used,
    /// The user who signed in is not the one the link was made for.
    WrongUser,
    /// A callback reached a browser other than the one that opened the link (a forwarded URL).
    OtherBrowser,
    /// The user (or a server) declined the authorization.
    Denied,
    /// No such `oauth` upstream, or no connection to it.
    NotFound,
    /// The upstream's authorization server (or the gateway's issuer) could not be used.
    AuthorizationServer,
    /// An authorization came back at the redirect URI of another upstream or authorization
    /// server than its `state` was sent to (a mix-up, RFC 9700 §4.4): its code is not redeemed.
    WrongServer,
    /// An authorization came back at `/oauth/callback`, the single redirect URI of earlier
    /// releases, which names no upstream or server.
    RetiredCallback,
}

impl ConnectFailure {
    /// What the user is told (never the detail, which goes to the log).
    pub fn message(self) -> &'static str {
        match self {
            Self::InvalidLink => {
                "This link is not valid or has expired. Call the tool again in your client to get a new one."
            }
            Self::Used => "This link has been used already. Call the tool again in your client to get a new one.",
            Self::WrongUser => {
                "You signed in as someone other than the user this link was made for. Nothing was connected."
            }
            Self::OtherBrowser => {
                "This page belongs to a connection started in another browser. Nothing was connected. Open the \
                 link your client gave you in this browser."
            }
            Self::Denied => "The authorization was not granted. Nothing was connected.",
            Self::NotFound => "Not found.",
            Self::AuthorizationServer => {
                "The authorization server could not be used right now. Nothing was connected; try again later."
            }
            Self::WrongServer => {
                "This authorization came back from another server than the one it was sent to. Nothing was \
                 connected. Call the tool again in your client to get a new link."
            }
            Self::RetiredCallback => {
                "This return address is no longer used (the gateway now has one per upstream and server). Nothing \
                 was connected. Call the tool again in your client to get a new link."
            }
        }
    }
}

/// Everything that can go wrong serving a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// A method other than POST on the MCP endpoint.
    #[error("Method Not Allowed: the MCP endpoint accepts POST only")]
    MethodNotAllowed,
    /// The `Origin` header names an origin that is not allowed.
    #[error("Forbidden: origin not allowed")]
    ForbiddenOrigin {
        /// The rejected origin, for the log.
        origin: String,
    },
    /// The `Host` header names a host that is not allowed (DNS rebinding).
    #[error("Forbidden: host not allowed")]
    ForbiddenHost {
        /// The rejected host, for the log.
        host: String,
    },
    /// `Content-Type` is not `application/json`.
    #[error("Unsupported Media Type: Content-Type must be application/json")]
    UnsupportedMediaType,
    /// `Accept` allows neither JSON nor SSE.
    #[error("Not Acceptable: Accept must include application/json or text/event-stream")]
    NotAcceptable,
    /// The body is larger than the configured limit.
    #[error("Payload Too Large: request bodies are limited to {limit} bytes")]
    PayloadTooLarge {
        /// The limit in bytes.
        limit: u64,
    },
    /// The client did not send its body within `http.body_timeout_secs`.
    #[error("Request Timeout: the request body did not arrive in time")]
    BodyTimeout,
    /// The body could not be read from the connection.
    #[error("Bad Request: the request body could not be read")]
    BodyRead {
        /// Why, for the log.
        #[source]
        source: BoxError,
    },
    /// Too many requests in flight on this replica.
    #[error("Service Unavailable: too many requests in flight, retry shortly")]
    Overloaded,
    /// This principal already holds as many listen streams on this replica as it may.
    #[error("Too Many Requests: at most {max} listen streams per caller are open at once; close one first")]
    TooManyListeners {
        /// The per-principal limit.
        max: u64,
    },
    /// This principal already has as many legacy `tasks/result` requests waiting on this
    /// replica as it may.
    #[error(
        "Too Many Requests: at most {max} tasks/result requests per caller wait at once; wait for one to end first"
    )]
    TooManyResultWaiters {
        /// The per-principal limit.
        max: u64,
    },
    /// A call that would become a task running here (it asked for input, or ran long) found
    /// every task worker of this replica taken.
    #[error("Service Unavailable: every task worker of this replica is busy, retry shortly")]
    NoFreeWorker,
    /// A rate limit of the caller's is exhausted (counted across every replica).
    #[error("Too Many Requests: rate limit of {limit} exceeded; retry after {} s", retry_after_secs(.retry_after))]
    RateLimited {
        /// Which limit, as the operator configured it.
        limit: String,
        /// When the request would be admitted.
        retry_after: std::time::Duration,
    },
    /// The caller is at one of its task quotas: nothing was created.
    #[error("Too Many Requests: quota exceeded: at most {max} {what} per caller; {}", quota_advice(.retry_after))]
    QuotaExceeded {
        /// Which quota (`running tasks`, `retained tasks`).
        what: &'static str,
        /// Its size.
        max: u64,
        /// When a place frees up, if known.
        retry_after: Option<std::time::Duration>,
    },
    /// No valid bearer token.
    #[error("Unauthorized: {reason}")]
    Unauthorized {
        /// Short client-safe reason.
        reason: String,
        /// The full `WWW-Authenticate` header value.
        challenge: String,
    },
    /// A valid token without the scopes this endpoint requires.
    #[error("Forbidden: insufficient scope")]
    InsufficientScope {
        /// The full `WWW-Authenticate` header value.
        challenge: String,
    },
    /// The body is not a valid JSON-RPC message.
    #[error(transparent)]
    Protocol {
        /// What the decoder said.
        #[from]
        source: ProtocolError,
    },
    /// A modern request whose `_meta` is present but malformed.
    #[error("Invalid params: invalid _meta: {detail}")]
    InvalidMeta {
        /// What is wrong.
        detail: String,
    },
    /// A modern request without the required `_meta` keys.
    #[error("Invalid params: missing _meta keys: {missing}")]
    MissingMeta {
        /// The missing keys, comma-separated.
        missing: String,
    },
    /// Mirrored HTTP headers missing, malformed or different from the body.
    #[error("Header mismatch: {detail}")]
    HeaderMismatch {
        /// Which header and how.
        detail: String,
    },
    /// A protocol version this server does not speak per request (already clipped).
    #[error("Unsupported protocol version: {requested}")]
    UnsupportedVersion {
        /// What the client asked for.
        requested: String,
    },
    /// Unknown method, or one the request's era does not have.
    #[error("Method not found: {method}")]
    MethodNotFound {
        /// The method name (truncated for the message).
        method: String,
    },
    /// The request needs a client capability it did not declare.
    #[error("{message}")]
    MissingCapability {
        /// Client-safe explanation.
        message: String,
        /// The capabilities the request must declare (boxed: it is large and rare).
        required: Box<ClientCapabilities>,
    },
    /// The call needs the user to open a URL first (a 2025-11-25 client that declared URL
    /// elicitation, e.g. to connect their account at an upstream): -32042 with the URL
    /// elicitations in `data`; the client calls again once the user is done.
    #[error("{message}")]
    UrlElicitationRequired {
        /// Client-safe explanation.
        message: String,
        /// `[{mode: "url", elicitationId, url, message}]`.
        elicitations: serde_json::Value,
    },
    /// A legacy request without a session id.
    #[error("Bad Request: Mcp-Session-Id header is required; send initialize first")]
    SessionRequired,
    /// A legacy session id that is tampered, expired or another principal's.
    #[error("Session not found: send initialize to start a new session")]
    SessionNotFound {
        /// Why it did not open, for the log.
        reason: &'static str,
    },
    /// A legacy session id opened on another endpoint (the root or another virtual server):
    /// a session serves the endpoint it was initialized on only.
    #[error("Session not found: this session was opened on {opened_on}; send initialize to this endpoint")]
    SessionOfAnotherEndpoint {
        /// Where it was opened (`the root endpoint /mcp` or `virtual server "x"`).
        opened_on: String,
    },
    /// A legacy `MCP-Protocol-Version` header that is invalid for the session.
    #[error("Bad Request: {detail}")]
    LegacyVersionHeader {
        /// What is wrong.
        detail: String,
    },
    /// Params that are well-formed JSON but wrong for the method.
    #[error("Invalid params: {detail}")]
    InvalidParams {
        /// What is wrong.
        detail: String,
    },
    /// A use of a tool, prompt or resource that policy denies (and does not hide): HTTP 200
    /// with -32600 in both eras, `data.rule` naming the deciding rule (`null`: the default).
    #[error("Forbidden: {message}")]
    PolicyDenied {
        /// The deciding rule (`None`: `policy_default`).
        rule: Option<String>,
        /// The rule's message, for the caller.
        message: String,
    },
    /// A use that policy denies and `policy_hide_denied` hides: on the wire exactly the "not
    /// found" it stands for (`shown`), so the caller cannot tell a hidden item from a missing
    /// one; the rule stays on this side, for the audit trail.
    #[error("{shown}")]
    PolicyHidden {
        /// The deciding rule (`None`: `policy_default`).
        rule: Option<String>,
        /// The "unknown tool / prompt / resource" the caller is answered with.
        shown: Box<GatewayError>,
    },
    /// `resources/read` of a URI no resource or template serves.
    #[error("Resource not found: {}", clip(uri))]
    ResourceNotFound {
        /// The requested URI.
        uri: String,
    },
    /// A legacy call whose task augmentation the tool does not allow (or requires).
    #[error("{detail}")]
    TaskSupport {
        /// What is wrong.
        detail: String,
    },
    /// A `requestState` that did not open: tampered, expired, replayed, or minted for another
    /// caller or another call. One message for every case; the reason goes to the log only.
    #[error("Invalid params: invalid requestState")]
    InvalidRequestState {
        /// Why (logged, never sent).
        reason: &'static str,
    },
    /// An admin API request without the admin bearer token (or with another).
    #[error("Unauthorized: the admin API needs its bearer token")]
    AdminUnauthorized,
    /// An admin API request that cannot be served as asked (a bad filter or cursor).
    #[error("Bad request: {detail}")]
    AdminInvalid {
        /// What is wrong.
        detail: String,
    },
    /// An admin API request that conflicts with the current state (an approval naming a
    /// definition hash that is no longer the latest seen).
    #[error("Conflict: {detail}")]
    AdminConflict {
        /// What changed.
        detail: String,
    },
    /// A task the admin API does not find (unknown, malformed, or expired).
    #[error("Not found: task {id}")]
    AdminNotFound {
        /// The id asked for.
        id: String,
    },
    /// A path the admin API does not serve (answered in the admin API's own form, so its
    /// client can tell the admin listener from any other).
    #[error("Not found: the admin API has no route {path}")]
    AdminNoRoute {
        /// The path asked for.
        path: String,
    },
    /// The task store holds what this replica cannot read: data it does not understand, or a
    /// sealed payload that does not open (wrong or retired key). A retry will not help.
    #[error("Internal error: a stored task cannot be read")]
    StoredData {
        /// What the store said, for the log.
        #[source]
        source: mcpgate_store::StoreError,
    },
    /// The task store cannot be reached (Redis down or slow); retry later.
    #[error("Internal error: task store unavailable, retry shortly")]
    Store {
        /// What the store said, for the log.
        #[source]
        source: mcpgate_store::StoreError,
    },
    /// Unknown, expired, malformed, or another principal's task (never "forbidden": no
    /// existence oracle).
    #[error("Invalid params: task not found: {task}")]
    TaskNotFound {
        /// The task id as given (clipped).
        task: String,
    },
    /// Legacy `tasks/cancel` of a task that already ended.
    #[error("Invalid params: task {task} has already finished ({status}) and cannot be cancelled")]
    TaskTerminal {
        /// The task id.
        task: String,
        /// Its final status.
        status: &'static str,
    },
    /// A task ended with this JSON-RPC error; `tasks/result` answers with it verbatim.
    #[error("{}", error.message)]
    TaskFailed {
        /// The stored error.
        error: ErrorObject,
    },
    /// Something this server does not offer in this situation (a limitation, not a fault).
    #[error("Not supported: {detail}")]
    NotSupported {
        /// What is not supported.
        detail: String,
    },
    /// The replica stopped before the call finished; retry elsewhere.
    #[error("Server shutting down: retry the request")]
    ShuttingDown,
    /// A synchronous call ran past `server.tool_timeout_secs`.
    #[error("Request timed out after {secs} s")]
    Timeout {
        /// The limit.
        secs: u64,
    },
    /// Something the call depends on failed (an upstream server, an interrupted run); the
    /// detail is client-safe.
    #[error("{detail}")]
    Unavailable {
        /// What failed.
        detail: String,
    },
    /// A step of connecting a user's account (a browser route under `/oauth/`) failed.
    #[error("{}", .failure.message())]
    Connect {
        /// Why, as the user is told.
        failure: ConnectFailure,
        /// What happened, for the log (never a token or a sealed value's contents).
        detail: String,
        /// What caused it, when another component did (for the log, like `detail`; never an
        /// error whose text could quote a token, a code or a sealed value's contents).
        #[source]
        source: Option<BoxError>,
    },
    /// Our fault; the detail and the cause are logged, never sent.
    #[error("Internal error")]
    Internal {
        /// What happened, for the log.
        detail: String,
        /// What caused it, when another component did (for the log).
        #[source]
        source: Option<BoxError>,
    },
}

/// Client input quoted in an error or a log is cut to this many characters.
const MAX_QUOTE: usize = 100;

/// Cuts client input for quoting in errors and logs.
pub(crate) fn clip(s: &str) -> String {
    mcpgate_protocol::quote::clip(s, MAX_QUOTE)
}

impl From<mcpgate_store::StoreError> for GatewayError {
    fn from(source: mcpgate_store::StoreError) -> Self {
        match source {
            mcpgate_store::StoreError::QuotaExceeded { kind, max, retry_after_ms } => Self::QuotaExceeded {
                what: kind.describe(),
                max,
                retry_after: retry_after_ms.map(std::time::Duration::from_millis),
            },
            source @ (mcpgate_store::StoreError::Corrupt { .. } | mcpgate_store::StoreError::Sealing { .. }) => {
                Self::StoredData { source }
            }
            // Unreachable, slow, or a write too few Redis replicas confirmed
            // (`store.replicas_ack`, NotAcknowledged): all retryable, all "unavailable".
            source => Self::Store { source },
        }
    }
}

impl From<Failure> for GatewayError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::InvalidParams(detail) | Failure::InvalidArguments(detail) => {
                GatewayError::InvalidParams { detail }
            }
            Failure::MissingCapability { required, message } => GatewayError::MissingCapability { message, required },
            Failure::ResourceNotFound(uri) => GatewayError::ResourceNotFound { uri },
            Failure::Internal(detail) => GatewayError::Internal { detail, source: None },
            Failure::Unavailable(detail) => GatewayError::Unavailable { detail },
        }
    }
}

/// How an error appears on the wire.
#[derive(Debug)]
pub struct Wire {
    /// HTTP status.
    pub status: StatusCode,
    /// JSON-RPC error object.
    pub error: ErrorObject,
    /// Extra response header, if any.
    pub header: Option<(header::HeaderName, String)>,
}

impl GatewayError {
    /// Shorthand for an internal error with a logged detail.
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::Internal { detail: detail.into(), source: None }
    }

    /// An internal error another component caused: `detail` says what failed, `source` why
    /// (both logged, never sent).
    pub fn internal_caused(detail: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Internal { detail: detail.into(), source: Some(source.into()) }
    }

    /// A step of connecting a user's account failed: the user is told `failure`, the log
    /// `detail`.
    pub(crate) fn connect(failure: ConnectFailure, detail: impl Into<String>) -> Self {
        Self::Connect { failure, detail: detail.into(), source: None }
    }

    /// Like [`GatewayError::connect`], caused by `source` (logged with it).
    pub(crate) fn connect_caused(
        failure: ConnectFailure,
        detail: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Self::Connect { failure, detail: detail.into(), source: Some(source.into()) }
    }

    /// Shorthand for invalid params.
    pub fn invalid_params(detail: impl Into<String>) -> Self {
        Self::InvalidParams { detail: detail.into() }
    }

    /// Shorthand for a header mismatch.
    pub fn header_mismatch(detail: impl Into<String>) -> Self {
        Self::HeaderMismatch { detail: detail.into() }
    }

    /// The one mapping from an error (in a request's era, if known) to the wire.
    pub fn wire(&self, era: Option<Era>) -> Wire {
        use GatewayError as E;
        let modern = era == Some(Era::Modern);
        // Errors that only a modern request can produce carry a status of their own; protocol
        // errors of a legacy session travel with 200 as 2025-11-25 servers conventionally do.
        let rpc_status = |modern_status: StatusCode| {
            if modern { modern_status } else { StatusCode::OK }
        };
        let message = self.to_string();
        let (status, code, data, header) = match self {
            E::Internal { .. } => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::INTERNAL_ERROR, None, None),
            E::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                ErrorCode::INVALID_REQUEST,
                None,
                Some((header::ALLOW, "POST".to_owned())),
            ),
            E::ForbiddenOrigin { .. } | E::ForbiddenHost { .. } => {
                (StatusCode::FORBIDDEN, ErrorCode::INVALID_REQUEST, None, None)
            }
            E::UnsupportedMediaType => (StatusCode::UNSUPPORTED_MEDIA_TYPE, ErrorCode::INVALID_REQUEST, None, None),
            E::NotAcceptable => (StatusCode::NOT_ACCEPTABLE, ErrorCode::INVALID_REQUEST, None, None),
            E::PayloadTooLarge { .. } => (StatusCode::PAYLOAD_TOO_LARGE, ErrorCode::INVALID_REQUEST, None, None),
            E::BodyRead { .. } => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST, None, None),
            E::BodyTimeout => (StatusCode::REQUEST_TIMEOUT, ErrorCode::INVALID_REQUEST, None, None),
            E::Overloaded | E::NoFreeWorker => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::INTERNAL_ERROR,
                None,
                Some((header::RETRY_AFTER, "1".to_owned())),
            ),
            E::TooManyListeners { .. } | E::TooManyResultWaiters { .. } => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::INVALID_REQUEST,
                None,
                Some((header::RETRY_AFTER, "5".to_owned())),
            ),
            E::RateLimited { limit, retry_after } => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::INVALID_REQUEST,
                Some(json!({
                    "limit": limit,
                    "retryAfterMs": u64::try_from(retry_after.as_millis()).unwrap_or(u64::MAX),
                })),
                Some((header::RETRY_AFTER, retry_after_secs(retry_after).to_string())),
            ),
            E::QuotaExceeded { what, max, retry_after } => (
                StatusCode::TOO_MANY_REQUESTS,
                ErrorCode::INVALID_REQUEST,
                Some(json!({
                    "quota": what,
                    "max": max,
                    "retryAfterMs": retry_after.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX)),
                })),
                retry_after.as_ref().map(|w| (header::RETRY_AFTER, retry_after_secs(w).to_string())),
            ),
            E::Unauthorized { challenge, .. } => (
                StatusCode::UNAUTHORIZED,
                ErrorCode::INVALID_REQUEST,
                None,
                Some((header::WWW_AUTHENTICATE, challenge.clone())),
            ),
            E::InsufficientScope { challenge } => (
                StatusCode::FORBIDDEN,
                ErrorCode::INVALID_REQUEST,
                None,
                Some((header::WWW_AUTHENTICATE, challenge.clone())),
            ),
            E::Protocol { source } => match source {
                ProtocolError::Parse { .. } => (StatusCode::BAD_REQUEST, ErrorCode::PARSE_ERROR, None, None),
                ProtocolError::InvalidParams { .. } => {
                    (rpc_status(StatusCode::OK), ErrorCode::INVALID_PARAMS, None, None)
                }
                _ => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST, None, None),
            },
            E::MissingMeta { .. } | E::InvalidMeta { .. } => {
                (StatusCode::BAD_REQUEST, ErrorCode::INVALID_PARAMS, None, None)
            }
            E::ShuttingDown => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::INTERNAL_ERROR,
                None,
                Some((header::RETRY_AFTER, "1".to_owned())),
            ),
            E::HeaderMismatch { .. } => (StatusCode::BAD_REQUEST, ErrorCode::HEADER_MISMATCH, None, None),
            E::UnsupportedVersion { requested } => {
                let err = ErrorObject::unsupported_version(&ProtocolVersion::all_strs(), requested);
                (StatusCode::BAD_REQUEST, ErrorCode::UNSUPPORTED_PROTOCOL_VERSION, err.data, None)
            }
            E::MethodNotFound { .. } => (rpc_status(StatusCode::NOT_FOUND), ErrorCode::METHOD_NOT_FOUND, None, None),
            E::MissingCapability { required, .. } => {
                if modern {
                    let err = ErrorObject::missing_capability("", required);
                    (StatusCode::BAD_REQUEST, ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY, err.data, None)
                } else {
                    (StatusCode::OK, ErrorCode::INVALID_PARAMS, None, None)
                }
            }
            E::UrlElicitationRequired { elicitations, .. } => (
                StatusCode::OK,
                ErrorCode::ACCEPTED_LEGACY_URL_ELICITATION_REQUIRED,
                Some(json!({ "elicitations": elicitations })),
                None,
            ),
            E::SessionRequired => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST, None, None),
            E::SessionNotFound { .. } | E::SessionOfAnotherEndpoint { .. } => {
                (StatusCode::NOT_FOUND, ErrorCode::INVALID_REQUEST, None, None)
            }
            E::LegacyVersionHeader { .. } => (StatusCode::BAD_REQUEST, ErrorCode::INVALID_REQUEST, None, None),
            E::InvalidParams { .. } => (rpc_status(StatusCode::OK), ErrorCode::INVALID_PARAMS, None, None),
            // A JSON-RPC error the model can read, not an HTTP 403: clients treat a 403 as an
            // authorization failure (step-up auth, or a transport error the model never sees),
            // and the token is fine. -32600 as for this gateway's other refusals; -32602 would
            // say the params are wrong, and -32000..-32099 are not ours to use (MCP range policy).
            E::PolicyDenied { rule, .. } => {
                (StatusCode::OK, ErrorCode::INVALID_REQUEST, Some(json!({ "rule": rule })), None)
            }
            // Its message is already `shown`'s (same Display); the rest is `shown`'s too.
            E::PolicyHidden { shown, .. } => {
                let shown = shown.wire(era);
                (shown.status, shown.error.code, shown.error.data, shown.header)
            }
            // 2025-11-25 had its own code for this; 2026-07-28 retired it for -32602.
            E::ResourceNotFound { uri } => {
                let code = if modern { ErrorCode::INVALID_PARAMS } else { ErrorCode::LEGACY_RESOURCE_NOT_FOUND };
                (StatusCode::OK, code, Some(json!({ "uri": uri })), None)
            }
            E::StoredData { .. } => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::INTERNAL_ERROR, None, None),
            // Admin API errors are answered by the admin API (see `admin_status`); on the MCP
            // endpoint they would be a bug.
            E::AdminUnauthorized
            | E::AdminInvalid { .. }
            | E::AdminConflict { .. }
            | E::AdminNotFound { .. }
            | E::AdminNoRoute { .. }
            | E::Connect { .. } => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::INTERNAL_ERROR, None, None),
            E::Store { .. } => (
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorCode::INTERNAL_ERROR,
                None,
                Some((header::RETRY_AFTER, "1".to_owned())),
            ),
            E::InvalidRequestState { .. } => (rpc_status(StatusCode::OK), ErrorCode::INVALID_PARAMS, None, None),
            E::TaskNotFound { .. } | E::TaskTerminal { .. } => {
                (rpc_status(StatusCode::OK), ErrorCode::INVALID_PARAMS, None, None)
            }
            E::TaskSupport { .. } => (rpc_status(StatusCode::NOT_FOUND), ErrorCode::METHOD_NOT_FOUND, None, None),
            E::TaskFailed { error } => (StatusCode::OK, error.code, error.data.clone(), None),
            E::Timeout { .. } | E::NotSupported { .. } | E::Unavailable { .. } => {
                (rpc_status(StatusCode::OK), ErrorCode::INTERNAL_ERROR, None, None)
            }
        };
        let mut error = ErrorObject::new(code, message);
        error.data = data;
        Wire { status, error, header }
    }

    /// The HTTP status of this error on the admin API (which speaks plain JSON, not JSON-RPC).
    pub fn admin_status(&self) -> StatusCode {
        match self {
            Self::AdminUnauthorized => StatusCode::UNAUTHORIZED,
            Self::AdminInvalid { .. } => StatusCode::BAD_REQUEST,
            Self::AdminNotFound { .. } | Self::AdminNoRoute { .. } => StatusCode::NOT_FOUND,
            Self::AdminConflict { .. } => StatusCode::CONFLICT,
            Self::ForbiddenOrigin { .. } | Self::ForbiddenHost { .. } => StatusCode::FORBIDDEN,
            Self::Store { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status of an error of a browser route under `/oauth/` (connect links, callbacks,
    /// disconnecting): the page shown with it says what the user can do.
    pub fn connect_status(&self) -> StatusCode {
        match self {
            Self::Connect { failure, .. } => match failure {
                ConnectFailure::InvalidLink | ConnectFailure::RetiredCallback => StatusCode::BAD_REQUEST,
                ConnectFailure::Used => StatusCode::GONE,
                ConnectFailure::WrongUser
                | ConnectFailure::OtherBrowser
                | ConnectFailure::Denied
                | ConnectFailure::WrongServer => StatusCode::FORBIDDEN,
                ConnectFailure::NotFound => StatusCode::NOT_FOUND,
                ConnectFailure::AuthorizationServer => StatusCode::BAD_GATEWAY,
            },
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::ForbiddenOrigin { .. } | Self::ForbiddenHost { .. } => StatusCode::FORBIDDEN,
            Self::Store { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether the error is the server's fault (logged at error level).
    pub fn is_server_fault(&self) -> bool {
        matches!(self, Self::Internal { .. } | Self::Store { .. } | Self::StoredData { .. })
    }
}

/// An error on its way out: the error plus what is known about the request.
#[derive(Debug)]
pub struct ErrorReply {
    /// The error.
    pub error: GatewayError,
    /// The request id, if it could be read.
    pub id: Option<RequestId>,
    /// The request's era, if it was decided.
    pub era: Option<Era>,
}

impl ErrorReply {
    /// An error before the request could be read.
    pub fn bare(error: GatewayError) -> Self {
        Self { error, id: None, era: None }
    }
}

impl From<GatewayError> for ErrorReply {
    fn from(error: GatewayError) -> Self {
        Self::bare(error)
    }
}

impl IntoResponse for ErrorReply {
    fn into_response(self) -> Response {
        match &self.error {
            e if e.is_server_fault() => tracing::error!(error = ?e, "request failed"),
            e => tracing::debug!(error = ?e, "request rejected"),
        }
        let wire = self.error.wire(self.era);
        let body = serde_json::to_vec(&ErrorResponse::new(self.id.as_ref(), &wire.error))
            .unwrap_or_else(|_| br#"{"jsonrpc":"2.0","error":{"code":-32603,"message":"Internal error"}}"#.to_vec());
        let mut response = (wire.status, Bytes::from(body)).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some((name, value)) = wire.header
            && let Ok(value) = HeaderValue::from_str(&value)
        {
            headers.insert(name, value);
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_too_few_redis_replicas_confirmed_is_retryable_unavailability() {
        let wire = GatewayError::from(mcpgate_store::StoreError::NotAcknowledged { wanted: 1, got: 0 }).wire(None);
        assert_eq!(wire.status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(wire.error.message.contains("task store unavailable, retry shortly"), "{:?}", wire.error);
        assert!(wire.header.is_some_and(|(name, _)| name == header::RETRY_AFTER), "a Retry-After says when");
    }
}
