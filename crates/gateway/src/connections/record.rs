//! The vault's records of connections: one per (principal, upstream), its tokens and what a
//! refresh needs sealed, its metadata (issuer, scope, expiry, when connected) in clear.
//!
//! Invariant: a record's value opens only as the record of its principal, upstream and
//! issuer (all three are the sealing's associated data), so a value copied to another user's
//! or upstream's key, or relabelled with another issuer, does not open; a value not sealed in
//! the current format (plain JSON written by someone without the key) is never used
//! (`vault_value`); the metadata never holds a token or a secret.

use serde::{Deserialize, Serialize};

use mcpgate_seal::RecordBinding;
use mcpgate_store::{Expect, Put, Vault as _, VaultEntry, VaultKey, VaultKind};
use mcpgate_upstream::oauth::{ClientAuth, ClientRegistration, ServerMetadata};

use super::Connector;
use super::vault_value::{Refused, VaultRecord};
use crate::error::GatewayError;

/// The record id sealed values are bound to.
const RECORD: &str = VaultRecord::Connection.record_id();
/// The field they are sealed as.
const FIELD: &str = "tokens";

/// Where `principal_key`'s connection to `upstream` is kept.
pub(crate) fn connection_key(principal_key: &str, upstream: &str) -> VaultKey {
    VaultKey::new(VaultKind::Connection, principal_key, upstream)
}

/// A connection's secrets and what refreshing it needs (sealed).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Connection {
    pub access_token: String,
    #[serde(default)]
    pub refresh_token: Option<String>,
    /// Unix ms; `None`: the server said nothing (then it lives until refused).
    #[serde(default)]
    pub expires_at_ms: Option<u64>,
    /// When the access token was issued (Unix ms).
    pub issued_at_ms: u64,
    #[serde(default)]
    pub scope: Option<String>,
    pub issuer: String,
    /// RFC 8707 `resource` of the tokens.
    pub resource: String,
    pub token_endpoint: String,
    pub client_id: String,
    #[serde(default)]
    pub client_secret: Option<String>,
    pub client_auth: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("issuer", &self.issuer)
            .field("expires_at_ms", &self.expires_at_ms)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The client it was authorized for.
    pub(super) fn client(&self) -> ClientRegistration {
        ClientRegistration {
            client_id: self.client_id.clone(),
            client_secret: self.client_secret.clone(),
            auth: ClientAuth::parse(&self.client_auth).unwrap_or(ClientAuth::None),
        }
    }

    /// Its authorization server, as far as a refresh needs it.
    pub(super) fn server(&self) -> ServerMetadata {
        Self::server_named(&self.issuer, &self.token_endpoint)
    }

    /// Authorization server `issuer` as far as redeeming and refreshing need it.
    pub(super) fn server_named(issuer: &str, token_endpoint: &str) -> ServerMetadata {
        ServerMetadata {
            issuer: issuer.to_owned(),
            authorization_endpoint: String::new(),
            token_endpoint: token_endpoint.to_owned(),
            registration_endpoint: None,
            scopes_supported: None,
            code_challenge_methods_supported: vec!["S256".to_owned()],
            token_endpoint_auth_methods_supported: None,
            authorization_response_iss_parameter_supported: false,
            client_id_metadata_document_supported: false,
            revocation_endpoint: None,
        }
    }

    /// Whether the access token should be refreshed at `now_ms`: within a minute of expiry,
    /// or within a quarter of its lifetime for tokens living less than four minutes (so a
    /// short-lived token is not refreshed on every use).
    pub(super) fn expiring(&self, now_ms: u64) -> bool {
        self.refresh_due_ms().is_some_and(|due| now_ms >= due)
    }

    /// How long from `now_ms` the access token may be used before it is [`Self::expiring`]
    /// (`None`: until refused).
    pub(super) fn fresh_for(&self, now_ms: u64) -> Option<std::time::Duration> {
        self.refresh_due_ms().map(|due| std::time::Duration::from_millis(due.saturating_sub(now_ms)))
    }

    /// When (Unix ms) the access token is due for a refresh, if it expires.
    fn refresh_due_ms(&self) -> Option<u64> {
        let expires = self.expires_at_ms?;
        let lifetime = expires.saturating_sub(self.issued_at_ms);
        Some(expires.saturating_sub((lifetime / 4).min(60_000)))
    }

    fn meta(&self, connected_at_ms: u64) -> ConnectionMeta {
        ConnectionMeta {
            issuer: self.issuer.clone(),
            scope: self.scope.clone(),
            expires_at: self.expires_at_ms,
            connected_at: connected_at_ms,
        }
    }
}

/// A connection's metadata, in clear (what operators list).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ConnectionMeta {
    pub issuer: String,
    #[serde(default)]
    pub scope: Option<String>,
    /// When the access token expires (Unix ms).
    #[serde(default)]
    pub expires_at: Option<u64>,
    /// When the user connected (Unix ms; kept across refreshes).
    pub connected_at: u64,
}

/// A record as read: its tokens, metadata and version.
#[derive(Debug, Clone)]
pub(super) struct Stored {
    pub connection: Connection,
    pub meta: ConnectionMeta,
    pub version: u64,
}

fn binding(principal_key: &str, upstream: &str, issuer: &str) -> RecordBinding {
    RecordBinding::new(RECORD, &[principal_key, upstream, issuer])
}

impl Connector {
    /// `principal_key`'s connection to `upstream`, if any (one store read). A record that is
    /// not sealed in the current format (planted), or does not open (tampered, corrupted,
    /// sealed with a key no longer in the ring), is never someone else's tokens, and never
    /// will be: it is dropped (at the version read, so not a connection written since) and
    /// counts as none, so the user is asked to connect again instead of failing on it for
    /// ever. Nothing of it is used, logged or sent anywhere.
    pub(super) async fn load(&self, principal_key: &str, upstream: &str) -> Result<Option<Stored>, GatewayError> {
        let Some(entry) = self.store.vault_get(&connection_key(principal_key, upstream)).await? else {
            return Ok(None);
        };
        let version = entry.version;
        match self.open(principal_key, upstream, entry) {
            Ok(stored) => Ok(Some(stored)),
            Err(refused) => {
                self.refused_vault_value(VaultRecord::Connection, upstream, refused);
                self.forget_version(principal_key, upstream, version).await?;
                Ok(None)
            }
        }
    }

    /// The record `entry` holds, or why it is not used (for logs and metrics only).
    pub(super) fn open(
        &self,
        principal_key: &str,
        upstream: &str,
        entry: VaultEntry,
    ) -> Result<Stored, (Refused, &'static str)> {
        let unreadable = |detail| (Refused::Unreadable, detail);
        // The parsers' errors are left out: their text may quote what they read (a token).
        let meta: ConnectionMeta = serde_json::from_str(&entry.meta).map_err(|_| unreadable("unreadable metadata"))?;
        let plain = self.open_vault_value(
            VaultRecord::Connection,
            &binding(principal_key, upstream, &meta.issuer),
            FIELD,
            entry.value,
        )?;
        let connection: Connection = serde_json::from_str(&plain).map_err(|_| unreadable("unreadable value"))?;
        if connection.issuer != meta.issuer {
            return Err(unreadable("issuer mismatch"));
        }
        Ok(Stored { connection, meta, version: entry.version })
    }

    /// Writes `connection` as `principal_key`'s to `upstream` if the record is as `expect`
    /// says; `connected_at_ms` is kept in its metadata.
    pub(super) async fn save(
        &self,
        principal_key: &str,
        upstream: &str,
        connection: &Connection,
        connected_at_ms: u64,
        expect: Expect,
    ) -> Result<Put, GatewayError> {
        let plain = serde_json::to_string(connection)
            .map_err(|e| GatewayError::internal_caused("cannot serialize a connection", e))?;
        let sealed = self
            .at_rest
            .seal_always(RECORD, &binding(principal_key, upstream, &connection.issuer), FIELD, &plain)
            .map_err(|e| GatewayError::internal_caused("cannot seal a connection", e))?;
        let meta = serde_json::to_string(&connection.meta(connected_at_ms))
            .map_err(|e| GatewayError::internal_caused("cannot serialize a connection's metadata", e))?;
        Ok(self.store.vault_put(&connection_key(principal_key, upstream), &sealed, &meta, expect).await?)
    }

    /// Forgets `principal_key`'s connection to `upstream` if it is still at `version` (what a
    /// decision to drop it was made on; a connection written since is kept); whether it did.
    pub(super) async fn forget_version(
        &self,
        principal_key: &str,
        upstream: &str,
        version: u64,
    ) -> Result<bool, GatewayError> {
        Ok(self.store.vault_delete_version(&connection_key(principal_key, upstream), version).await?)
    }
}
