//! Which client the gateway is at an upstream's authorization server: the one the operator
//! registered beforehand; else its Client ID Metadata Document (when the public URL is https
//! and the server takes one and sends `iss`); else a client it registered itself (RFC 7591) —
//! once per (upstream, issuer) for the whole fleet, for that pair's own redirect URI, kept
//! sealed in the vault.
//!
//! Invariants: two replicas never both register: one takes a store lock and writes the
//! registration only where there is none (`Expect::Absent`); the others wait (bounded) and
//! read what it wrote. A client whose redirect URI does not name one server (a document, or a
//! client id without a pinned issuer) is used only with a server that sends `iss` (see
//! `redirect`). A registration is used only as the gateway sealed it (current format, bound to its
//! upstream and issuer, `vault_value`): one planted in plain counts as none, and the gateway
//! registers anew over it.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use mcpgate_seal::RecordBinding;
use mcpgate_store::{Expect, Locks as _, Put, Vault as _, VaultKey, VaultKind};
use mcpgate_upstream::oauth::{ClientAuth, ClientRegistration, ServerMetadata};

use super::client_source::ClientSource;
use super::digest::digest;
use super::redirect::callback_path;
use super::vault_value::{Refused, VaultRecord};
use super::{Connector, Upstream, random_hex};
use crate::error::{ConnectFailure, GatewayError};
use crate::time::now_ms;

/// The record id sealed values are bound to.
const RECORD: &str = VaultRecord::Registration.record_id();
const FIELD: &str = "client";
/// How long a registering replica may hold the lock (a registration is one request).
const LOCK_TTL: Duration = Duration::from_secs(30);
/// How long another replica waits for its registration.
const WAIT: Duration = Duration::from_secs(15);

#[derive(Serialize, Deserialize)]
struct SealedClient {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    auth: String,
}

#[derive(Serialize, Deserialize)]
struct RegistrationMeta {
    client_id: String,
    redirect_uri: String,
    registered_at: u64,
}

impl Connector {
    /// The client to authorize `upstream` with at `server`, and where it came from.
    pub(super) async fn client_for(
        &self,
        upstream: &Upstream,
        server: &ServerMetadata,
    ) -> Result<(ClientRegistration, ClientSource), GatewayError> {
        let oauth = upstream.config.oauth();
        // Discovery keeps to the pinned issuer already; a pre-registered client (its secret
        // above all) is offered to no other server, whatever found `server`.
        if let Some(pinned) = &oauth.issuer
            && pinned.trim_end_matches('/') != server.issuer.trim_end_matches('/')
        {
            return Err(authorization_server(format!(
                "{:?} is not the configured issuer {pinned:?} of upstream {}",
                server.issuer, upstream.config.name
            )));
        }
        let sends_iss = server.authorization_response_iss_parameter_supported;
        if let Some(client_id) = oauth.client_id {
            // Without a pinned issuer, the redirect URI names no server: only `iss` can tell
            // this server's answers from another's (a mix-up).
            if oauth.issuer.is_none() && !sends_iss {
                return Err(authorization_server(format!(
                    "upstream {}: {:?} does not send iss (RFC 9207), so its answers cannot be told from another \
                     server's; set [upstream.oauth] issuer to the server client_id was registered at",
                    upstream.config.name, server.issuer
                )));
            }
            let auth = match &oauth.client_secret {
                None => ClientAuth::None,
                Some(_) => preferred_secret_auth(server),
            };
            let client = ClientRegistration { client_id, client_secret: oauth.client_secret, auth };
            return Ok((client, ClientSource::Configured));
        }
        // A document is the same client at every server that takes one: only `iss` tells this
        // server's answers from another's, so it is used only where the server sends it.
        if server.client_id_metadata_document_supported
            && sends_iss
            && let Some(client_id) = self.client_metadata_url()
        {
            let client = ClientRegistration { client_id, client_secret: None, auth: ClientAuth::None };
            return Ok((client, ClientSource::Metadata));
        }
        if server.registration_endpoint.is_none() && server.client_id_metadata_document_supported && !sends_iss {
            return Err(authorization_server(format!(
                "upstream {}: {:?} takes a Client ID Metadata Document but does not send iss (RFC 9207), and offers \
                 no registration: register a client there and set [upstream.oauth] client_id and issuer",
                upstream.config.name, server.issuer
            )));
        }
        Ok((self.registered(upstream, server).await?, ClientSource::Registered))
    }

    /// The secret of a client found before (at the callback, where the flow's state names
    /// the client but never holds its secret).
    pub(super) async fn client_again(
        &self,
        upstream: &Upstream,
        issuer: &str,
        client_id: &str,
        auth: ClientAuth,
        source: ClientSource,
    ) -> Result<ClientRegistration, GatewayError> {
        let secret = match source {
            ClientSource::Metadata => None,
            ClientSource::Configured => upstream.config.oauth().client_secret,
            ClientSource::Registered => {
                let key = VaultKey::new(VaultKind::Registration, &upstream.config.name, issuer);
                let found = self.read_registration(&upstream.config.name, issuer, &key).await?;
                found.filter(|c| c.client_id == client_id).and_then(|c| c.client_secret)
            }
        };
        Ok(ClientRegistration { client_id: client_id.to_owned(), client_secret: secret, auth })
    }

    /// The fleet's registration at `server` for `upstream`, registering once if there is none
    /// (or the one there was made for another redirect URI: one of an earlier release).
    async fn registered(
        &self,
        upstream: &Upstream,
        server: &ServerMetadata,
    ) -> Result<ClientRegistration, GatewayError> {
        let name = &upstream.config.name;
        let issuer = &server.issuer;
        let key = VaultKey::new(VaultKind::Registration, name, issuer);
        let redirect_uri = self.public(&callback_path(name, ClientSource::Registered, issuer));
        if let Some(found) = self.usable_registration(name, issuer, &key, &redirect_uri).await? {
            return Ok(found);
        }
        let lock = format!("oauth-register:{}", digest(&[name, issuer]));
        let holder = random_hex()?;
        let deadline = tokio::time::Instant::now() + WAIT;
        loop {
            if self.store.try_lock(&lock, &holder, LOCK_TTL).await? {
                let result = self.register_holding_lock(upstream, server, &key, &redirect_uri).await;
                let _ = self.store.unlock(&lock, &holder).await;
                return result;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            if let Some(found) = self.usable_registration(name, issuer, &key, &redirect_uri).await? {
                return Ok(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(authorization_server(format!(
                    "another replica's registration at {issuer} did not finish in {WAIT:?}"
                )));
            }
        }
    }

    async fn register_holding_lock(
        &self,
        upstream: &Upstream,
        server: &ServerMetadata,
        key: &VaultKey,
        redirect_uri: &str,
    ) -> Result<ClientRegistration, GatewayError> {
        let (name, issuer) = (&upstream.config.name, &server.issuer);
        // Another replica may have registered between our read and our lock.
        let existing = self.store.vault_get(key).await?;
        if let Some(entry) = &existing
            && let Ok(meta) = serde_json::from_str::<RegistrationMeta>(&entry.meta)
            && meta.redirect_uri == redirect_uri
            && let Some(found) = self.read_registration(name, issuer, key).await?
        {
            return Ok(found);
        }
        let client = upstream
            .oauth
            .register(server, "mcpgate", redirect_uri)
            .await
            .map_err(|e| authorization_server_caused(format!("registering at {issuer}"), e))?;
        tracing::info!(upstream = %name, issuer = %issuer, "registered the gateway as an OAuth client");
        let sealed = SealedClient {
            client_id: client.client_id.clone(),
            client_secret: client.client_secret.clone(),
            auth: client.auth.as_str().to_owned(),
        };
        let plain = serde_json::to_string(&sealed)
            .map_err(|e| GatewayError::internal_caused("cannot serialize a registration", e))?;
        let value = self
            .at_rest
            .seal_always(RECORD, &RecordBinding::new(RECORD, &[name, issuer]), FIELD, &plain)
            .map_err(|e| GatewayError::internal_caused("cannot seal a registration", e))?;
        let meta = RegistrationMeta {
            client_id: client.client_id.clone(),
            redirect_uri: redirect_uri.to_owned(),
            registered_at: now_ms(),
        };
        let meta = serde_json::to_string(&meta)
            .map_err(|e| GatewayError::internal_caused("cannot serialize a registration's metadata", e))?;
        let expect = existing.map_or(Expect::Absent, |e| Expect::Version(e.version));
        match self.store.vault_put(key, &value, &meta, expect).await? {
            Put::Saved { .. } => Ok(client),
            // Written meanwhile despite the lock (it lapsed): use the fleet's, not ours.
            Put::Conflict { .. } => self
                .read_registration(name, issuer, key)
                .await?
                .ok_or_else(|| GatewayError::internal("a registration vanished while being written")),
        }
    }

    async fn usable_registration(
        &self,
        upstream: &str,
        issuer: &str,
        key: &VaultKey,
        redirect_uri: &str,
    ) -> Result<Option<ClientRegistration>, GatewayError> {
        let Some(entry) = self.store.vault_get(key).await? else { return Ok(None) };
        let current =
            serde_json::from_str::<RegistrationMeta>(&entry.meta).is_ok_and(|m| m.redirect_uri == redirect_uri);
        if !current {
            return Ok(None);
        }
        self.read_registration(upstream, issuer, key).await
    }

    async fn read_registration(
        &self,
        upstream: &str,
        issuer: &str,
        key: &VaultKey,
    ) -> Result<Option<ClientRegistration>, GatewayError> {
        let Some(entry) = self.store.vault_get(key).await? else { return Ok(None) };
        let binding = RecordBinding::new(RECORD, &[upstream, issuer]);
        let opened = self.open_vault_value(VaultRecord::Registration, &binding, FIELD, entry.value).and_then(|plain| {
            // The parser's error is left out: its text may quote the opened value (a secret).
            serde_json::from_str::<SealedClient>(&plain).map_err(|_| (Refused::Unreadable, "unreadable registration"))
        });
        // One that is not the gateway's own sealed registration counts as none: the gateway
        // registers again (over it), and never offers a planted client id or secret.
        let sealed = match opened {
            Ok(sealed) => sealed,
            Err(refused) => {
                self.refused_vault_value(VaultRecord::Registration, upstream, refused);
                return Ok(None);
            }
        };
        let auth = ClientAuth::parse(&sealed.auth).unwrap_or(ClientAuth::None);
        Ok(Some(ClientRegistration { client_id: sealed.client_id, client_secret: sealed.client_secret, auth }))
    }
}

/// How a confidential client authenticates where `server` says what it takes: basic first.
fn preferred_secret_auth(server: &ServerMetadata) -> ClientAuth {
    let methods = server.token_endpoint_auth_methods_supported.as_deref().unwrap_or_default();
    if methods.is_empty() || methods.iter().any(|m| m == "client_secret_basic") {
        ClientAuth::Basic
    } else if methods.iter().any(|m| m == "client_secret_post") {
        ClientAuth::Post
    } else {
        ClientAuth::Basic
    }
}

/// An authorization server (the upstream's, or the gateway's own issuer) failed the step
/// `detail` names.
pub(super) fn authorization_server(detail: String) -> GatewayError {
    GatewayError::connect(ConnectFailure::AuthorizationServer, detail)
}

/// Like [`authorization_server`], caused by `source` (never an error quoting a token or a
/// code: the OAuth client's errors name the endpoint and the server's answer, not what was
/// sent).
pub(super) fn authorization_server_caused(detail: String, source: impl Into<crate::error::BoxError>) -> GatewayError {
    GatewayError::connect_caused(ConnectFailure::AuthorizationServer, detail, source)
}
