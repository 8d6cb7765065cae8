//! The seam between an `auth = "oauth"` upstream and the gateway that keeps its users'
//! connections: a call looks the caller's connection up once (one vault read: whether they
//! hold one, and its token, [`HeldToken`]), and its requests go with that token; a request
//! without one (a task's later requests, an answer to the server) or whose token is due for a
//! refresh asks for the token then; the upstream says when it refused one. The gateway answers
//! from its sealed vault (refreshing, single-flight across replicas) or with the link the
//! caller must open to connect.
//!
//! Invariant: an `oauth` upstream's request carries the token of the principal it is made
//! for, or is not sent; no token is ever shared between principals or sent elsewhere (a
//! [`HeldToken`] is looked up for one principal and goes only with requests made for them).

use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

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

/// A caller's access token as one look-up of their connection found it, and until when it
/// may be sent without asking the [`Connections`] again: past that, it is due for a refresh,
/// and a request asks for the token anew (which refreshes it). The requests it goes with
/// share it: a token one of them is given instead (asked for once due, or after the upstream
/// refused the held one) is the one the next of them sends. `Debug` shows no token.
#[derive(Clone)]
pub struct HeldToken(Arc<Mutex<Held>>);

struct Held {
    credential: Credential,
    /// When the token is due for a refresh (`None`: not before the upstream refuses it).
    refresh_due: Option<Instant>,
}

impl HeldToken {
    /// `credential`, to be refreshed `fresh_for` from now (`None`: when refused).
    pub fn new(credential: Credential, fresh_for: Option<Duration>) -> Self {
        Self(Arc::new(Mutex::new(Held { credential, refresh_due: fresh_for.map(|d| Instant::now() + d) })))
    }

    /// The token, unless it is due for a refresh by now.
    pub(crate) fn fresh(&self) -> Option<Credential> {
        let held = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match held.refresh_due {
            Some(due) if Instant::now() >= due => None,
            _ => Some(held.credential.clone()),
        }
    }

    /// The upstream refused the held token: it is due from now on, so the requests that
    /// follow ask the [`Connections`] (which hand out the token refreshed meanwhile, with its
    /// own expiry checked) instead of sending it again.
    pub(crate) fn refused(&self) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).refresh_due = Some(Instant::now());
    }
}

impl fmt::Debug for HeldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let due = self.0.lock().unwrap_or_else(PoisonError::into_inner).refresh_due;
        f.debug_struct("HeldToken").field("refresh_due", &due).finish_non_exhaustive()
    }
}

/// Where an `oauth` upstream's per-caller tokens come from (the gateway's vault).
pub trait Connections: Send + Sync + fmt::Debug {
    /// `principal`'s access token for `upstream`, refreshed first when it is about to expire.
    /// Without a usable connection: [`UpstreamError::ConnectionRequired`]. Asked by a request
    /// that holds no [`HeldToken`], or whose token is due for a refresh.
    fn bearer<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>>;

    /// `principal`'s connection to `upstream`, if they hold one: its token as stored (which
    /// decides whether their lists show the upstream's own tools or its `<upstream>_connect`
    /// stand-in, and goes with the requests of the call or list that looked it up). One store
    /// read, never a refresh: a token due for one says so ([`HeldToken`]).
    fn lookup<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<HeldToken>, UpstreamError>>;

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
