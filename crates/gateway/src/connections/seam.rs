//! The gateway's answer to an `oauth` upstream asking for a caller's connection or token
//! (`mcpgate_upstream::oauth::Connections`): from the vault (one read: a call's look-up, whose
//! token its requests then hold), refreshed first when about to expire (a request whose held
//! token is due asks again), or the connect link the caller must open.
//!
//! Invariant: a token is only ever returned for the principal whose record holds it; any
//! failure to produce one is either `ConnectionRequired` (the user can fix it by connecting)
//! or an authorization error naming what failed (never a token); a connection that cannot
//! work any more (refused right after a refresh, a record that does not open) is dropped, at
//! the version read, and the user asked to connect again.

use std::sync::Arc;

use mcpgate_runtime::catalog::BoxFuture;
use mcpgate_runtime::{Credential, Principal};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{BearerChallenge, Connections, HeldToken, Refusal};

use super::Connector;
use super::refresh::Refreshed;
use crate::error::GatewayError;
use crate::time::now_ms;

/// The connector as the federation's [`Connections`]: shared, since a refresh runs in a task
/// of its own that outlives a cancelled caller (see `refresh`).
#[derive(Debug)]
struct Seam(Arc<Connector>);

impl Connector {
    /// The [`Connections`] the federation is given (once, at start-up).
    pub(crate) fn seam(self: &Arc<Self>) -> Arc<dyn Connections> {
        Arc::new(Seam(Arc::clone(self)))
    }

    /// `ConnectionRequired` with a fresh link asking for `scopes` besides the usual.
    fn required(&self, upstream: &str, principal: &Principal, scopes: Option<String>) -> UpstreamError {
        match self.connect_link(principal, upstream, scopes) {
            Ok((url, elicitation_id)) => {
                UpstreamError::ConnectionRequired { upstream: upstream.to_owned(), url, elicitation_id }
            }
            Err(e) => failed(e),
        }
    }

    async fn current_bearer(
        self: &Arc<Self>,
        upstream: &str,
        principal: &Principal,
    ) -> Result<Credential, UpstreamError> {
        let key = principal.key();
        let Some(stored) = self.load(key, upstream).await.map_err(failed)? else {
            return Err(self.required(upstream, principal, None));
        };
        if !stored.connection.expiring(now_ms()) {
            return Ok(Credential::bearer(&stored.connection.access_token));
        }
        match self.refresh(key, upstream, &stored).await.map_err(failed)? {
            Refreshed::Token(token) => Ok(Credential::bearer(&token)),
            Refreshed::Gone => Err(self.required(upstream, principal, None)),
        }
    }

    async fn after_refusal(
        self: &Arc<Self>,
        upstream: &str,
        principal: &Principal,
        stale: &Credential,
        refusal: Refusal,
        challenge: Option<&BearerChallenge>,
    ) -> Result<Credential, UpstreamError> {
        let key = principal.key();
        let Some(stored) = self.load(key, upstream).await.map_err(failed)? else {
            return Err(self.required(upstream, principal, None));
        };
        match refusal {
            Refusal::Forbidden => {
                let scopes = union(stored.connection.scope.as_deref(), challenge.and_then(|c| c.scope.as_deref()));
                return Err(self.required(upstream, principal, scopes));
            }
            Refusal::StillUnauthorized => {
                // Refused right after a refresh (or another replica's newer token): the
                // connection no longer works. Dropped unless it changed since `stale` was read.
                if stored.connection.access_token == stale.expose() {
                    self.forget_version(key, upstream, stored.version).await.map_err(failed)?;
                    tracing::info!(upstream = %upstream, "a fresh token was refused: the user must connect again");
                }
                return Err(self.required(upstream, principal, None));
            }
            Refusal::Unauthorized => {}
        }
        if stored.connection.access_token != stale.expose() {
            // Refreshed (or connected again) since `stale` was read: try that one.
            return Ok(Credential::bearer(&stored.connection.access_token));
        }
        match self.refresh(key, upstream, &stored).await.map_err(failed)? {
            Refreshed::Token(token) => Ok(Credential::bearer(&token)),
            Refreshed::Gone => Err(self.required(upstream, principal, None)),
        }
    }
}

impl Connections for Seam {
    fn bearer<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(self.0.current_bearer(upstream, principal))
    }

    /// One store read; a record that does not open counts as none (and is dropped). Never
    /// refreshes: a token due for it is held as such, and the request asks [`Self::bearer`].
    fn lookup<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<HeldToken>, UpstreamError>> {
        Box::pin(async move {
            let stored = self.0.load(principal.key(), upstream).await.map_err(failed)?;
            Ok(stored.map(|stored| {
                let connection = &stored.connection;
                HeldToken::new(Credential::bearer(&connection.access_token), connection.fresh_for(now_ms()))
            }))
        })
    }

    fn refused<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
        stale: &'a Credential,
        refusal: Refusal,
        challenge: Option<&'a BearerChallenge>,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(self.0.after_refusal(upstream, principal, stale, refusal, challenge))
    }
}

/// The scopes of both, each once, in order.
fn union(held: Option<&str>, wanted: Option<&str>) -> Option<String> {
    let mut scopes: Vec<&str> = Vec::new();
    for scope in held.into_iter().chain(wanted).flat_map(str::split_whitespace) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    (!scopes.is_empty()).then(|| scopes.join(" "))
}

/// `e` logged (its detail and whole chain), and what the upstream's caller is told instead.
fn failed(e: GatewayError) -> UpstreamError {
    let detail = match &e {
        GatewayError::Unavailable { detail } => Some(detail.as_str()),
        other => other.log_detail(),
    };
    tracing::warn!(detail, error = &e as &dyn std::error::Error, "a user's upstream connection could not be used");
    UpstreamError::Authorization { detail: client_safe(&e), source: None }
}

/// What a caller may be told, as the whole text (it crosses into the upstream crate's error,
/// which a tool result quotes): no record internals, no cause.
fn client_safe(e: &GatewayError) -> String {
    match e {
        GatewayError::Store { .. } => "the connection store is unavailable, retry shortly".to_owned(),
        GatewayError::Unavailable { detail } => detail.clone(),
        _ => "the stored connection cannot be used".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::union;

    #[test]
    fn step_up_scopes_keep_what_was_held_once() {
        assert_eq!(union(Some("a b"), Some("b c")).as_deref(), Some("a b c"));
        assert_eq!(union(None, Some("c")).as_deref(), Some("c"));
        assert_eq!(union(None, None), None);
    }
}
