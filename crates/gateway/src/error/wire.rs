//! The one place where an error becomes an HTTP status, a JSON-RPC error object and response
//! headers (`GatewayError::wire`; the admin API's and the browser routes' plain statuses
//! beside it), and the error response itself (`ErrorReply`), which logs the error's whole chain.
//!
//! Invariant: the answer is decided by the error's variant and by walking its `source` chain
//! (a store error anywhere in it gets the store's answer), never by matching its text.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::json;

use mcpgate_protocol::jsonrpc::ErrorResponse;
use mcpgate_protocol::{Era, ErrorCode, ErrorObject, ProtocolError, ProtocolVersion, RequestId};
use mcpgate_store::StoreError;

use super::chain::cause_ref;
use super::connect::ConnectFailure;
use super::request::GatewayError;
use super::request::{STORE_UNAVAILABLE, STORED_DATA_UNREADABLE, StoreAnswer, retry_after_secs};

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
    /// The one mapping from an error (in a request's era, if known) to the wire.
    pub fn wire(&self, era: Option<Era>) -> Wire {
        use GatewayError as E;
        // A store error anywhere in the chain decides: the store's answer, whatever wraps it.
        if let Some(answer) = self.store_answer() {
            return answer.wire(era);
        }
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
            // Found in the chain above; here for completeness only.
            E::StoredData { source } | E::Store { source } => return StoreAnswer::of(source).wire(era),
            // Admin API errors are answered by the admin API (see `admin_status`); on the MCP
            // endpoint they would be a bug.
            E::AdminUnauthorized
            | E::AdminInvalid { .. }
            | E::AdminConflict { .. }
            | E::AdminNotFound { .. }
            | E::AdminNoRoute { .. }
            | E::Connect { .. } => (StatusCode::INTERNAL_SERVER_ERROR, ErrorCode::INTERNAL_ERROR, None, None),
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
        if let Some(answer) = self.store_answer() {
            return answer.plain_status();
        }
        match self {
            Self::AdminUnauthorized => StatusCode::UNAUTHORIZED,
            Self::AdminInvalid { .. } => StatusCode::BAD_REQUEST,
            Self::AdminNotFound { .. } | Self::AdminNoRoute { .. } => StatusCode::NOT_FOUND,
            Self::AdminConflict { .. } => StatusCode::CONFLICT,
            Self::ForbiddenOrigin { .. } | Self::ForbiddenHost { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The status of an error of a browser route under `/oauth/` (connect links, callbacks,
    /// disconnecting): the page shown with it says what the user can do.
    pub fn connect_status(&self) -> StatusCode {
        // A connect failure is answered as the page that names it, whatever caused it.
        if let Self::Connect { failure, .. } = self {
            return match failure {
                ConnectFailure::InvalidLink | ConnectFailure::RetiredCallback => StatusCode::BAD_REQUEST,
                ConnectFailure::Used => StatusCode::GONE,
                ConnectFailure::WrongUser
                | ConnectFailure::OtherBrowser
                | ConnectFailure::Denied
                | ConnectFailure::WrongServer => StatusCode::FORBIDDEN,
                ConnectFailure::NotFound => StatusCode::NOT_FOUND,
                ConnectFailure::AuthorizationServer => StatusCode::BAD_GATEWAY,
            };
        }
        if let Some(answer) = self.store_answer() {
            return answer.plain_status();
        }
        match self {
            Self::Unauthorized { .. } => StatusCode::UNAUTHORIZED,
            Self::ForbiddenOrigin { .. } | Self::ForbiddenHost { .. } => StatusCode::FORBIDDEN,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// Whether the error is the server's fault (logged at error level).
    pub fn is_server_fault(&self) -> bool {
        matches!(self, Self::Internal { .. })
            || self.store_answer().is_some_and(|answer| !matches!(answer, StoreAnswer::Quota { .. }))
    }

    /// How the store error in this error's chain (if any) is answered.
    fn store_answer(&self) -> Option<StoreAnswer> {
        cause_ref::<StoreError>(self).map(StoreAnswer::of)
    }

    /// What is logged beside the chain: the fields a client is never shown.
    pub(crate) fn log_detail(&self) -> Option<&str> {
        match self {
            Self::Internal { detail, .. } | Self::Connect { detail, .. } => Some(detail),
            Self::ForbiddenOrigin { origin } => Some(origin),
            Self::ForbiddenHost { host } => Some(host),
            Self::SessionNotFound { reason } | Self::InvalidRequestState { reason } => Some(reason),
            Self::PolicyDenied { rule, .. } | Self::PolicyHidden { rule, .. } => rule.as_deref(),
            Self::Unauthorized { challenge, .. } | Self::InsufficientScope { challenge } => Some(challenge),
            _ => None,
        }
    }
}

impl StoreAnswer {
    /// The store's answer on the wire (in a request's era, if known).
    fn wire(self, era: Option<Era>) -> Wire {
        let (status, message, retry) = match self {
            Self::Quota { what, max, retry_after } => {
                return GatewayError::QuotaExceeded { what, max, retry_after }.wire(era);
            }
            Self::Unreadable => (StatusCode::INTERNAL_SERVER_ERROR, STORED_DATA_UNREADABLE, false),
            Self::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, STORE_UNAVAILABLE, true),
        };
        Wire {
            status,
            error: ErrorObject::new(ErrorCode::INTERNAL_ERROR, message.to_owned()),
            header: retry.then(|| (header::RETRY_AFTER, "1".to_owned())),
        }
    }

    /// The status of the store's answer on the plain-JSON routes (the admin API, `/oauth/`):
    /// only an unreachable store is worth a retry.
    fn plain_status(&self) -> StatusCode {
        match self {
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Quota { .. } | Self::Unreadable => StatusCode::INTERNAL_SERVER_ERROR,
        }
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
            e if e.is_server_fault() => {
                tracing::error!(error = e as &dyn std::error::Error, detail = e.log_detail(), "request failed");
            }
            e => tracing::debug!(error = e as &dyn std::error::Error, detail = e.log_detail(), "request rejected"),
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

    #[test]
    fn a_store_error_anywhere_in_the_chain_gets_the_store_answer() {
        let down = GatewayError::from(mcpgate_store::StoreError::NotAcknowledged { wanted: 1, got: 0 }).wire(None);
        let wrapped = GatewayError::internal_caused(
            "reading a task",
            mcpgate_store::StoreError::NotAcknowledged { wanted: 1, got: 0 },
        );
        let wire = wrapped.wire(None);
        assert_eq!(
            (wire.status, wire.error.code, &wire.error.message),
            (down.status, down.error.code, &down.error.message)
        );
        assert_eq!(wire.header, down.header);
        assert!(wrapped.is_server_fault());
        assert_eq!(wrapped.admin_status(), StatusCode::SERVICE_UNAVAILABLE);
        let plain = GatewayError::internal_caused("rendering", std::io::Error::other("x")).wire(None);
        assert_eq!((plain.status, plain.error.message.as_str()), (StatusCode::INTERNAL_SERVER_ERROR, "Internal error"));
    }
}
