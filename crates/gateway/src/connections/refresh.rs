//! Refreshing a user's access token, single-flight across the fleet: one replica takes the
//! connection's store lock, re-reads the record (another may have refreshed it meanwhile:
//! then its token is used), spends the refresh token and writes the new tokens only over the
//! version it read; the others wait (bounded) for that write and use it.
//!
//! Invariant: a refresh token is spent by at most one replica at a time, and a spent one is
//! never written back over the tokens that replaced it (compare-and-set on the version); the
//! lock-spend-write-unlock runs to its end even when its caller is cancelled; a record is
//! dropped only when the server says the grant is over (`invalid_grant`), and only at the
//! version that was refreshed.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_store::{Expect, Locks as _, Put};
use mcpgate_upstream::UpstreamError;

use super::digest::digest;
use super::record::Stored;
use super::{Connector, random_hex};
use crate::error::GatewayError;
use crate::time::now_ms;

/// How long another replica's refresh is waited for.
const WAIT: Duration = Duration::from_secs(10);

/// What a refresh came to.
#[derive(Debug)]
pub(super) enum Refreshed {
    /// The current access token (ours, or another replica's).
    Token(String),
    /// No usable connection any more (none, or the refresh token was refused): ask the user.
    Gone,
}

impl Connector {
    /// Refreshes the connection `seen` was read as (version), unless another replica did
    /// already.
    pub(super) async fn refresh(
        self: &Arc<Self>,
        principal_key: &str,
        upstream: &str,
        seen: &Stored,
    ) -> Result<Refreshed, GatewayError> {
        let lock = format!("oauth-refresh:{}", digest(&[principal_key, upstream]));
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if let Some(refreshed) = self.refresh_if_free(&lock, principal_key, upstream, seen).await? {
                return Ok(refreshed);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            match self.load(principal_key, upstream).await? {
                None => return Ok(Refreshed::Gone),
                Some(now) if now.version != seen.version => return Ok(Refreshed::Token(now.connection.access_token)),
                Some(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(GatewayError::Unavailable {
                        detail: format!("another replica's refresh of the connection to {upstream} did not finish"),
                    });
                }
                Some(_) => {}
            }
        }
    }

    /// Takes `lock` and, if it was free, refreshes and releases it (`None`: taken). All of it
    /// runs in a task of its own, which a caller that stops waiting (cancelled, timed out)
    /// does not stop: once the server has rotated the refresh token, the new one is written
    /// and the lock released, whoever still waits for it.
    async fn refresh_if_free(
        self: &Arc<Self>,
        lock: &str,
        principal_key: &str,
        upstream: &str,
        seen: &Stored,
    ) -> Result<Option<Refreshed>, GatewayError> {
        let holder = random_hex()?;
        let timeout = self.upstreams.get(upstream).map_or(Duration::from_secs(10), |u| u.config.oauth().timeout());
        let (this, lock, seen) = (Arc::clone(self), lock.to_owned(), seen.clone());
        let (principal_key, upstream) = (principal_key.to_owned(), upstream.to_owned());
        let run = tokio::spawn(async move {
            if !this.store.try_lock(&lock, &holder, timeout * 2 + Duration::from_secs(5)).await? {
                return Ok(None);
            }
            let result = this.refresh_holding_lock(&principal_key, &upstream, &seen).await;
            let _ = this.store.unlock(&lock, &holder).await;
            result.map(Some)
        });
        run.await.map_err(|e| GatewayError::internal_caused("a refresh did not finish", e))?
    }

    async fn refresh_holding_lock(
        &self,
        principal_key: &str,
        upstream: &str,
        seen: &Stored,
    ) -> Result<Refreshed, GatewayError> {
        let Some(current) = self.load(principal_key, upstream).await? else { return Ok(Refreshed::Gone) };
        if current.version != seen.version {
            return Ok(Refreshed::Token(current.connection.access_token));
        }
        let Some(refresh_token) = current.connection.refresh_token.clone() else {
            self.forget_version(principal_key, upstream, current.version).await?;
            return Ok(Refreshed::Gone);
        };
        let Some(client) = self.upstreams.get(upstream) else { return Ok(Refreshed::Gone) };
        let old = &current.connection;
        let span = tracing::info_span!("oauth_refresh", upstream = %upstream, issuer = %old.issuer);
        let answer = tracing::Instrument::instrument(
            client.oauth.refresh(&old.server(), &old.client(), &refresh_token, &old.resource),
            span,
        )
        .await;
        let tokens = match answer {
            Ok(tokens) => tokens,
            // The grant itself is over (revoked, expired, a spent rotating token): only the
            // user can make a new one. Dropped at the version refreshed, never a newer one.
            Err(UpstreamError::AuthorizationRefused { error, .. }) if error == "invalid_grant" => {
                self.stats.refresh(upstream, false);
                tracing::info!(upstream = %upstream, "refresh refused (invalid_grant): the user must connect again");
                if self.forget_version(principal_key, upstream, current.version).await? {
                    return Ok(Refreshed::Gone);
                }
                // Connected again meanwhile: that connection is theirs to use.
                return Ok(self
                    .load(principal_key, upstream)
                    .await?
                    .map_or(Refreshed::Gone, |now| Refreshed::Token(now.connection.access_token)));
            }
            // Anything else (`invalid_client` after a secret rotated, `invalid_scope`, a server
            // error) says nothing against this user's grant: kept, and the refresh fails.
            Err(UpstreamError::AuthorizationRefused { error, .. }) => {
                self.stats.refresh(upstream, false);
                tracing::warn!(upstream = %upstream, error = %error, "refresh refused; the connection is kept");
                return Err(GatewayError::Unavailable {
                    detail: format!("the authorization server of {upstream} refused the refresh ({error})"),
                });
            }
            Err(e) => {
                self.stats.refresh(upstream, false);
                // Text, not a source: `Unavailable`'s detail is what the caller is told, whole
                // (the OAuth client's errors name the endpoint and the server's answer, never
                // the refresh token sent).
                return Err(GatewayError::Unavailable {
                    detail: format!("refreshing the connection to {upstream}: {}", e.client_text()),
                });
            }
        };
        self.stats.refresh(upstream, true);
        let now = now_ms();
        let mut renewed = old.clone();
        renewed.access_token = tokens.access_token;
        // A server that does not rotate keeps the old refresh token valid.
        renewed.refresh_token = tokens.refresh_token.or(old.refresh_token.clone());
        renewed.expires_at_ms = tokens.expires_in.map(|s| now.saturating_add(s.saturating_mul(1000)));
        renewed.issued_at_ms = now;
        if tokens.scope.is_some() {
            renewed.scope = tokens.scope;
        }
        match self
            .save(principal_key, upstream, &renewed, current.meta.connected_at, Expect::Version(current.version))
            .await?
        {
            Put::Saved { .. } => Ok(Refreshed::Token(renewed.access_token)),
            // Replaced meanwhile (the user connected again): theirs is newer than ours.
            Put::Conflict { .. } => match self.load(principal_key, upstream).await? {
                Some(now) => Ok(Refreshed::Token(now.connection.access_token)),
                None => Ok(Refreshed::Gone),
            },
        }
    }
}
