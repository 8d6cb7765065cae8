//! The seam between an `auth = "oauth"` upstream and the gateway that keeps its users'
//! connections: the upstream asks for the caller's access token before each request and says
//! when the upstream refused one; the gateway answers from its sealed vault (refreshing,
//! single-flight across replicas) or with the link the caller must open to connect.
//!
//! Invariant: an `oauth` upstream's request carries the token of the principal it is made
//! for, or is not sent; no token is ever shared between principals or sent elsewhere.

use std::fmt;

use mcpgate_runtime::catalog::BoxFuture;
use mcpgate_runtime::{Credential, Principal};

use crate::error::UpstreamError;
use crate::oauth::BearerChallenge;

/// Why the upstream refused a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP 401: the token is invalid, expired or revoked.
    Unauthorized,
    /// HTTP 403 (`insufficient_scope`): valid, but the call needs more scopes.
    Forbidden,
    /// HTTP 401 again, for the token given back after an `Unauthorized`: the connection no
    /// longer works (revoked, or its tokens no longer accepted). It is dropped and the user
    /// asked to connect again; no further token is tried.
    StillUnauthorized,
}

/// The error of an `oauth` upstream's HTTP 401 or 403 answer: a refused token (401), or one
/// lacking scope (403 `insufficient_scope`), for the connections to act on; any other 403
/// refuses this caller the call itself, which neither a refresh nor connecting again changes
/// (and which says nothing of the upstream's health).
pub(crate) fn refused(status: u16, challenge: Option<BearerChallenge>) -> UpstreamError {
    if status == 401 || challenge.as_ref().is_some_and(BearerChallenge::insufficient_scope) {
        return UpstreamError::TokenRefused { status, challenge };
    }
    UpstreamError::authorization(format!("the upstream refused the call (HTTP {status})"))
}

/// Where an `oauth` upstream's per-caller tokens come from (the gateway's vault).
pub trait Connections: Send + Sync + fmt::Debug {
    /// `principal`'s access token for `upstream`, refreshed first when it is about to expire.
    /// Without a usable connection: [`UpstreamError::ConnectionRequired`].
    fn bearer<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>>;

    /// Whether `principal` holds a connection to `upstream` (which decides whether their lists
    /// show the upstream's own tools or its `<upstream>_connect` stand-in). One store read.
    fn connected<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<bool, UpstreamError>>;

    /// The upstream refused `stale` (sent for `principal`) with `refusal` and its
    /// `WWW-Authenticate` challenge, if any: a fresh token to try once more (a refresh,
    /// single-flight across replicas; or the token another replica refreshed meanwhile), else
    /// [`UpstreamError::ConnectionRequired`] (for a 403, with the challenge's scopes added).
    fn refused<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
        stale: &'a Credential,
        refusal: Refusal,
        challenge: Option<&'a BearerChallenge>,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>>;
}
