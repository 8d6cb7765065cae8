//! `GatewayError`: everything that can go wrong serving a request, each variant with the
//! client-facing message it is answered with (its `Display`) and, where another component
//! failed, that component's error kept as its `source`. How a variant travels on the wire is
//! decided in `wire`, not here.

use std::time::Duration;

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::{ErrorObject, ProtocolError};
use mcpgate_runtime::catalog::Failure;
use mcpgate_store::StoreError;

use super::chain::BoxError;
use super::connect::ConnectFailure;

/// Client input quoted in an error or a log is cut to this many characters.
const MAX_QUOTE: usize = 100;

/// Cuts client input for quoting in errors and logs.
pub(crate) fn clip(s: &str) -> String {
    mcpgate_protocol::quote::clip(s, MAX_QUOTE)
}

/// What a client is told when the task store cannot be reached.
pub(super) const STORE_UNAVAILABLE: &str = "Internal error: task store unavailable, retry shortly";
/// What a client is told when the task store holds what this replica cannot read.
pub(super) const STORED_DATA_UNREADABLE: &str = "Internal error: a stored task cannot be read";

/// Whole seconds of a `Retry-After`: rounded up, at least 1.
pub(super) fn retry_after_secs(wait: &Duration) -> u64 {
    wait.as_secs().saturating_add(u64::from(wait.subsec_nanos() > 0)).max(1)
}

/// What a caller at a quota can do.
fn quota_advice(retry_after: &Option<Duration>) -> String {
    match retry_after {
        Some(wait) => format!("the oldest expires in {} s", retry_after_secs(wait)),
        None => "retry once one of them ends".to_owned(),
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
    #[error("{}", STORED_DATA_UNREADABLE)]
    StoredData {
        /// What the store said, for the log.
        #[source]
        source: StoreError,
    },
    /// The task store cannot be reached (Redis down or slow); retry later.
    #[error("{}", STORE_UNAVAILABLE)]
    Store {
        /// What the store said, for the log.
        #[source]
        source: StoreError,
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
        /// What caused it, when another component did (for the log; a store error here gets
        /// the store's answer on the wire).
        #[source]
        source: Option<BoxError>,
    },
}

/// What a store error means to a caller: the one classification `From<StoreError>` and the
/// wire mapping (for a store error found deeper in a chain) share.
pub(super) enum StoreAnswer {
    /// The caller is at a task quota: nothing was created.
    Quota {
        /// Which quota.
        what: &'static str,
        /// Its size.
        max: u64,
        /// When a place frees up, if known.
        retry_after: Option<Duration>,
    },
    /// The store holds what this replica cannot read (a retry will not help).
    Unreadable,
    /// Unreachable, slow, or a write too few Redis replicas confirmed (`store.replicas_ack`,
    /// NotAcknowledged): all retryable, all "unavailable".
    Unavailable,
}

impl StoreAnswer {
    /// How the store's error is answered.
    pub(super) fn of(error: &StoreError) -> Self {
        match error {
            StoreError::QuotaExceeded { kind, max, retry_after_ms } => {
                Self::Quota { what: kind.describe(), max: *max, retry_after: retry_after_ms.map(Duration::from_millis) }
            }
            StoreError::Corrupt { .. } | StoreError::Sealing { .. } => Self::Unreadable,
            _ => Self::Unavailable,
        }
    }
}

impl From<StoreError> for GatewayError {
    fn from(source: StoreError) -> Self {
        match StoreAnswer::of(&source) {
            StoreAnswer::Quota { what, max, retry_after } => Self::QuotaExceeded { what, max, retry_after },
            StoreAnswer::Unreadable => Self::StoredData { source },
            StoreAnswer::Unavailable => Self::Store { source },
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
            Failure::Internal(detail) => GatewayError::internal(detail),
            Failure::Unavailable(detail) => GatewayError::Unavailable { detail },
        }
    }
}

impl GatewayError {
    /// Shorthand for an internal error with a logged detail, in our own words.
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
}
