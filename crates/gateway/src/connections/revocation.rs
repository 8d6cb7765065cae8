//! Disconnecting (the user's `DELETE /oauth/connections/<upstream>`, an operator's
//! `mcpgate admin credentials revoke`): the record is forgotten, and its tokens are revoked
//! at the authorization server (RFC 7009) where its metadata offers a revocation endpoint,
//! so a copy leaked before (a log, a backup of the store, a compromised replica) dies with
//! the connection instead of living on until it expires.
//!
//! Invariant: the record deleted is the very one whose tokens are revoked (deleted at the
//! version read, so tokens a refresh rotated in meanwhile are not left alive); the record is
//! forgotten whatever the server does, and the tokens are revoked even when the replicas do
//! not confirm the delete (`store.replicas_ack`); revoking is best effort and bounded (each
//! request by the upstream's OAuth timeout, all of it by twice that), runs to its end even
//! when the caller goes away, is logged without any token, and is done only with a record
//! the gateway sealed (a planted one is never sent anywhere) at the server its issuer names,
//! discovered afresh. Not covered: a server without a revocation endpoint, and
//! self-contained (JWT) access tokens a server cannot revoke, which live until they expire.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_store::{StoreError, Vault as _};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::TokenKind;

use super::Connector;
use super::record::{Connection, connection_key};
use super::stats::Revocation;
use super::vault_value::VaultRecord;
use crate::error::GatewayError;

/// Tries at deleting the record at the version read before deleting whatever is there.
const ATTEMPTS: usize = 3;

impl Connector {
    /// Forgets `principal_key`'s connection to `upstream`, then revokes its tokens at the
    /// authorization server (best effort, bounded); whether there was a connection.
    pub(crate) async fn disconnect(
        self: &Arc<Self>,
        principal_key: &str,
        upstream: &str,
    ) -> Result<bool, GatewayError> {
        let key = connection_key(principal_key, upstream);
        for attempt in 1..=ATTEMPTS {
            let Some(entry) = self.store.vault_get(&key).await? else { return Ok(false) };
            let version = entry.version;
            let opened = self.open(principal_key, upstream, entry);
            // A refresh between the read and the delete rotates the tokens: delete only what
            // was read, so the tokens revoked are the ones forgotten (the last try deletes
            // whatever is there, so a record rewritten again and again is still forgotten).
            let deleted = if attempt < ATTEMPTS {
                self.store.vault_delete_version(&key, version).await
            } else {
                self.store.vault_delete(&key).await
            };
            let deleted = match deleted {
                Ok(deleted) => deleted,
                // Deleted on the primary, not confirmed by its replicas (`store.replicas_ack`):
                // the user asked to disconnect, so the tokens are revoked all the same (a
                // record a failover brings back then fails and is dropped), and the caller
                // hears that the store did not confirm.
                Err(e @ StoreError::NotAcknowledged { .. }) => {
                    if let Ok(stored) = opened {
                        self.revoke_detached(upstream, stored.connection).await;
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e.into()),
            };
            if !deleted {
                continue;
            }
            match opened {
                Ok(stored) => self.revoke_detached(upstream, stored.connection).await,
                Err(refused) => self.refused_vault_value(VaultRecord::Connection, upstream, refused),
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Revokes `connection`'s tokens in a task of its own (a caller that stops waiting does
    /// not stop it), waiting for it at most as long as it may run.
    async fn revoke_detached(self: &Arc<Self>, upstream: &str, connection: Connection) {
        let Some(timeout) = self.upstreams.get(upstream).map(|u| u.config.oauth().timeout()) else {
            // No longer configured: no client to revoke with.
            return;
        };
        let bound = timeout.saturating_mul(2).max(Duration::from_secs(1));
        let (this, name) = (Arc::clone(self), upstream.to_owned());
        let run = tokio::spawn(async move {
            let outcome = match tokio::time::timeout(bound, this.revoke(&name, &connection)).await {
                Ok(outcome) => outcome,
                Err(_) => Err(UpstreamError::Timeout { secs: bound.as_secs() }),
            };
            let counted = match outcome {
                Ok(Revocation::Revoked) => {
                    tracing::info!(upstream = %name, "revoked a disconnected user's tokens");
                    Revocation::Revoked
                }
                Ok(other) => {
                    tracing::info!(upstream = %name, "the authorization server offers no token revocation");
                    other
                }
                Err(e) => {
                    tracing::warn!(upstream = %name, error = &e as &dyn std::error::Error, "could not revoke a disconnected user's tokens");
                    Revocation::Failed
                }
            };
            this.stats.revocation(&name, counted);
        });
        let _ = run.await;
    }

    /// Revokes the refresh token (RFC 7009 §2.1: the server then also revokes the access
    /// tokens of its grant), then the access token too (for servers that do not); without a
    /// refresh token, the access token. The outcome is the first one's.
    async fn revoke(&self, upstream: &str, connection: &Connection) -> Result<Revocation, UpstreamError> {
        let Some(client) = self.upstreams.get(upstream) else { return Ok(Revocation::Unsupported) };
        let server = client.oauth.server_metadata(&connection.issuer).await?;
        if server.revocation_endpoint.is_none() {
            return Ok(Revocation::Unsupported);
        }
        let registration = connection.client();
        let (first, kind) = match &connection.refresh_token {
            Some(refresh) => (refresh.as_str(), TokenKind::Refresh),
            None => (connection.access_token.as_str(), TokenKind::Access),
        };
        client.oauth.revoke(&server, &registration, first, kind).await?;
        if kind == TokenKind::Refresh
            && let Err(e) =
                client.oauth.revoke(&server, &registration, &connection.access_token, TokenKind::Access).await
        {
            // The grant is revoked already; a server may refuse to revoke a self-contained
            // access token, which then lives until it expires.
            tracing::info!(upstream = %upstream, error = &e as &dyn std::error::Error, "the access token itself was not revoked");
        }
        Ok(Revocation::Revoked)
    }
}
