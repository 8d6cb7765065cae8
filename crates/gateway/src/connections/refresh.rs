//! Refreshing a user's access token, single-flight across the fleet: one replica takes the
//! connection's store lock, re-reads the record (another may have refreshed it meanwhile:
//! then its token is used), spends the refresh token and writes the new tokens only over the
//! version it read; the others wait (bounded) for that write and use it.
//!
//! Invariant: a refresh token is spent by at most one replica at a time, and a spent one is
//! never written back over the tokens that replaced it (compare-and-set on the version).

use std::time::Duration;

use sha2::{Digest as _, Sha256};

use mcpgate_store::{Expect, Locks as _, Put};
use mcpgate_upstream::UpstreamError;

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

/// A short hex digest of `parts` (lock names: no principal in clear in the store's keys).
pub(super) fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

impl Connector {
    /// Refreshes the connection `seen` was read as (version), unless another replica did
    /// already.
    pub(super) async fn refresh(
        &self,
        principal_key: &str,
        upstream: &str,
        seen: &Stored,
    ) -> Result<Refreshed, GatewayError> {
        let lock = format!("oauth-refresh:{}", digest(&[principal_key, upstream]));
        let holder = random_hex()?;
        let timeout = self.upstreams.get(upstream).map_or(Duration::from_secs(10), |u| u.config.oauth().timeout());
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if self.store.try_lock(&lock, &holder, timeout * 2 + Duration::from_secs(5)).await? {
                let result = self.refresh_holding_lock(principal_key, upstream, seen).await;
                let _ = self.store.unlock(&lock, &holder).await;
                return result;
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
            self.forget(principal_key, upstream).await?;
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
            Err(UpstreamError::AuthorizationRefused { error, .. }) => {
                self.stats.refresh(upstream, false);
                tracing::info!(upstream = %upstream, error = %error, "refresh refused: the user must connect again");
                self.forget(principal_key, upstream).await?;
                return Ok(Refreshed::Gone);
            }
            Err(e) => {
                self.stats.refresh(upstream, false);
                return Err(GatewayError::Unavailable {
                    detail: format!("refreshing the connection to {upstream}: {e}"),
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
