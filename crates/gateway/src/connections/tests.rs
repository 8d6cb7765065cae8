//! The connector against a real token endpoint on loopback (a small axum server that rotates
//! refresh tokens and, like oidc-provider, revokes the grant when a spent one comes back; it
//! can hold a request, or refuse with a given OAuth error) and the memory store shared by two
//! connectors, as two replicas share Redis: refreshing is single-flight and survives its
//! caller's cancellation; only `invalid_grant` drops a connection, never one written since; a
//! fresh token refused again, or a record that does not open, asks the user again; a 403 asks
//! for more scopes; a client whose redirect URI names no single server is used only where the
//! server sends `iss`.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::json;
use tokio::sync::oneshot;

use mcpgate_runtime::{Credential, Principal};
use mcpgate_seal::{KeyRing, Sealer};
use mcpgate_store::{AnyStore, Expect, MemoryStore};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{BearerChallenge, Connections, Refusal};

use super::Connector;
use super::flow::{ConnectLink, Step};
use super::record::Connection;
use crate::config::Config;
use crate::time::now_ms;

/// The token endpoint's state: the one live refresh token and how many refreshes it granted;
/// optionally an OAuth error it answers every refresh with, and a hold on the next request.
#[derive(Default)]
struct Grant {
    live: Option<String>,
    refreshes: u32,
    refuse_with: Option<&'static str>,
    hold: Option<Hold>,
}

/// Holds the next token request: says when it arrived, answers it when released.
struct Hold {
    arrived: oneshot::Sender<()>,
    release: oneshot::Receiver<()>,
}

/// Holds `grant`'s next token request; (when it arrived, the release).
fn hold(grant: &Shared) -> (oneshot::Receiver<()>, oneshot::Sender<()>) {
    let ((arrived, arrival), (release, released)) = (oneshot::channel(), oneshot::channel());
    grant.lock().unwrap_or_else(PoisonError::into_inner).hold = Some(Hold { arrived, release: released });
    (arrival, release)
}

/// Waits (bounded) for what `what` names.
async fn within<T>(what: &str, future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(std::time::Duration::from_secs(15), future)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

type Shared = Arc<Mutex<Grant>>;

async fn token(State(grant): State<Shared>, body: String) -> axum::response::Response {
    let presented =
        body.split('&').find_map(|p| p.strip_prefix("refresh_token=")).map(str::to_owned).unwrap_or_default();
    let held = grant.lock().unwrap_or_else(PoisonError::into_inner).hold.take();
    if let Some(Hold { arrived, release }) = held {
        let _ = arrived.send(());
        let _ = release.await;
    }
    if let Some(error) = grant.lock().unwrap_or_else(PoisonError::into_inner).refuse_with {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({ "error": error }))).into_response();
    }
    let issued = {
        let mut grant = grant.lock().unwrap_or_else(PoisonError::into_inner);
        if grant.live.as_deref() == Some(presented.as_str()) {
            grant.refreshes += 1;
            grant.live = Some(format!("rt-{}", grant.refreshes));
            Some(grant.refreshes)
        } else {
            grant.live = None;
            None
        }
    };
    let Some(n) = issued else {
        return (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_grant"}))).into_response();
    };
    // Slow enough that a second replica finds the lock taken.
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    axum::Json(json!({"access_token": format!("at-{n}"), "token_type": "Bearer", "refresh_token": format!("rt-{n}"),
        "expires_in": 300}))
    .into_response()
}

/// A token endpoint whose live refresh token is `rt-0`; its URL.
async fn token_endpoint() -> (String, Shared) {
    let grant: Shared = Arc::new(Mutex::new(Grant { live: Some("rt-0".to_owned()), ..Grant::default() }));
    let app = axum::Router::new().route("/token", post(token)).with_state(grant.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/token"), grant)
}

/// The connector of a replica, as the federation sees it (and the connector itself).
fn connector(store: &MemoryStore, sealer: &Sealer) -> (Arc<dyn Connections>, Arc<Connector>) {
    let connector = connector_only(store, sealer);
    (connector.seam(), connector)
}

fn connector_only(store: &MemoryStore, sealer: &Sealer) -> Arc<Connector> {
    let mut config = Config::default();
    let mut upstream = mcpgate_upstream::UpstreamConfig::http("files", "http://127.0.0.1:9/mcp");
    upstream.auth = mcpgate_upstream::config::UpstreamAuth::Oauth;
    config.upstream = vec![upstream];
    config.server.public_url = Some("https://gw.example".to_owned());
    config.auth.browser_login.verify_user = false;
    Connector::from_config(&config, AnyStore::Memory(store.clone()), sealer)
        .expect("builds")
        .expect("an oauth upstream")
}

fn alice() -> Principal {
    Principal::new("https://id.example", "alice", Vec::new())
}

/// Stores Alice's connection whose access token `at-0` expires in a second.
async fn connect_alice(connector: &Connector, token_endpoint: &str) {
    let connection = alice_connection(token_endpoint, "at-0");
    connector.save(alice().key(), "files", &connection, now_ms(), Expect::Absent).await.expect("saved");
}

/// Alice's connection with access token `access_token` (expiring in a second) and `rt-0`.
fn alice_connection(token_endpoint: &str, access_token: &str) -> Connection {
    let now = now_ms();
    Connection {
        access_token: access_token.to_owned(),
        refresh_token: Some("rt-0".to_owned()),
        expires_at_ms: Some(now + 1_000),
        issued_at_ms: now - 299_000,
        scope: Some("a".to_owned()),
        issuer: "https://as.example".to_owned(),
        resource: "http://127.0.0.1:9/mcp".to_owned(),
        token_endpoint: token_endpoint.to_owned(),
        client_id: "gw".to_owned(),
        client_secret: None,
        client_auth: "none".to_owned(),
    }
}

fn sealer() -> Sealer {
    sealer_of("t")
}

/// A sealer whose one key has id `key_id` (a fresh key each time).
fn sealer_of(key_id: &str) -> Sealer {
    Sealer::new(KeyRing::generate(key_id).expect("a key"), 16 * 1024)
}

fn refreshes(grant: &Shared) -> u32 {
    grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes
}

/// The link a `ConnectionRequired` names, opened as the connect route opens it.
async fn link_of(connector: &Connector, error: UpstreamError) -> ConnectLink {
    let UpstreamError::ConnectionRequired { url, elicitation_id, upstream } = error else {
        panic!("expected ConnectionRequired, got {error:?}");
    };
    assert_eq!(upstream, "files");
    let sealed = url.strip_prefix("https://gw.example/oauth/connect/").unwrap_or_else(|| panic!("{url}"));
    let link: ConnectLink = connector.open_flow(Step::Link, sealed).await.expect("the link opens");
    assert_eq!(link.nonce, elicitation_id);
    link
}

#[tokio::test]
async fn two_replicas_refreshing_one_expiring_token_spend_the_refresh_token_once() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let ((one, replica), (two, _)) = (connector(&store, &sealer), connector(&store, &sealer));
    connect_alice(&replica, &url).await;
    let principal = alice();
    let (a, b) = tokio::join!(one.bearer("files", &principal), two.bearer("files", &principal));
    let (a, b) = (a.expect("a token"), b.expect("a token"));
    assert_eq!((a.expose(), b.expose()), ("at-1", "at-1"), "both use the one refresh");
    assert_eq!(grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes, 1);
    // Fresh now: no refresh.
    assert_eq!(one.bearer("files", &principal).await.expect("a token").expose(), "at-1");
    assert_eq!(grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes, 1);
    assert!(one.lookup("files", &principal).await.expect("read").is_some());
    let bob = Principal::new("https://id.example", "bob", Vec::new());
    assert!(one.lookup("files", &bob).await.expect("read").is_none());
}

#[tokio::test]
async fn a_401_uses_a_newer_token_else_refreshes_once_and_a_refused_refresh_asks_again() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    let principal = alice();
    let fresh = connector.bearer("files", &principal).await.expect("refreshed");
    assert_eq!(fresh.expose(), "at-1");
    // Another replica still held at-0 and got a 401: the newer token, no refresh.
    let stale = Credential::bearer("at-0");
    let retry = connector.refused("files", &principal, &stale, Refusal::Unauthorized, None).await.expect("a token");
    assert_eq!((retry.expose(), grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes), ("at-1", 1));
    // at-1 itself refused (revoked): one refresh.
    let retry = connector.refused("files", &principal, &fresh, Refusal::Unauthorized, None).await.expect("a token");
    assert_eq!(retry.expose(), "at-2");
    // The grant is revoked at the server: the refresh is refused, the record goes, the user is asked.
    grant.lock().unwrap_or_else(PoisonError::into_inner).live = None;
    let error = connector.refused("files", &principal, &retry, Refusal::Unauthorized, None).await.expect_err("gone");
    let link = link_of(&replica, error).await;
    assert_eq!((link.principal.as_str(), link.subject.as_str(), link.scopes), (principal.key(), "alice", None));
    assert!(connector.lookup("files", &principal).await.expect("read").is_none(), "the record is gone");
    let error = connector.bearer("files", &principal).await.expect_err("not connected");
    assert!(matches!(error, UpstreamError::ConnectionRequired { .. }), "{error:?}");
}

#[tokio::test]
async fn a_403_asks_to_connect_again_with_the_held_and_the_challenged_scopes() {
    let (url, _grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    let challenge = BearerChallenge { scope: Some("b a".to_owned()), ..BearerChallenge::default() };
    let stale = Credential::bearer("at-0");
    let error =
        connector.refused("files", &alice(), &stale, Refusal::Forbidden, Some(&challenge)).await.expect_err("step-up");
    let link = link_of(&replica, error).await;
    assert_eq!(link.scopes.as_deref(), Some("a b"));
    // A link is good once.
    let UpstreamError::ConnectionRequired { url, .. } =
        connector.bearer("files", &Principal::new("https://id.example", "bob", Vec::new())).await.expect_err("bob")
    else {
        panic!("ConnectionRequired");
    };
    let sealed = url.rsplit('/').next().expect("a sealed link");
    assert!(replica.open_flow::<ConnectLink>(Step::Link, sealed).await.is_ok());
    assert!(replica.open_flow::<ConnectLink>(Step::Link, sealed).await.is_err(), "replayed");
}

#[tokio::test]
async fn a_caller_that_stops_waiting_mid_refresh_loses_neither_the_rotated_token_nor_the_lock() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    let principal = alice();
    let (arrival, release) = hold(&grant);
    // The caller is cancelled (its future dropped) once its refresh reached the token endpoint.
    tokio::select! {
        outcome = connector.bearer("files", &principal) => panic!("the refresh is held, yet: {:?}", outcome.is_ok()),
        arrived = within("the refresh to reach the token endpoint", arrival) => arrived.expect("arrived"),
    }
    let _ = release.send(());
    // The server rotated the refresh token: the next caller gets the new tokens, no second
    // refresh (which would spend the old, revoked, one), and no lock left behind to wait on.
    let next = within("the next caller's token", connector.bearer("files", &principal)).await.expect("a token");
    assert_eq!((next.expose(), refreshes(&grant)), ("at-1", 1));
    let stored = replica.load(principal.key(), "files").await.expect("read").expect("kept");
    assert_eq!(stored.connection.refresh_token.as_deref(), Some("rt-1"), "the rotated refresh token was saved");
}

#[tokio::test]
async fn a_refresh_refused_for_another_reason_than_the_grant_keeps_the_connection() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    let principal = alice();
    // The gateway's client secret rotated at the server: nothing this user can fix.
    grant.lock().unwrap_or_else(PoisonError::into_inner).refuse_with = Some("invalid_client");
    let error = connector.bearer("files", &principal).await.expect_err("refused");
    assert!(
        matches!(&error, UpstreamError::Authorization { detail, .. } if detail.contains("invalid_client")),
        "{error:?}"
    );
    assert!(connector.lookup("files", &principal).await.expect("read").is_some(), "the connection is kept");
    // Once the client is fixed, the same grant refreshes.
    grant.lock().unwrap_or_else(PoisonError::into_inner).refuse_with = None;
    assert_eq!(connector.bearer("files", &principal).await.expect("a token").expose(), "at-1");
}

#[tokio::test]
async fn a_refused_refresh_of_the_old_grant_keeps_a_connection_made_meanwhile() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    grant.lock().unwrap_or_else(PoisonError::into_inner).live = None;
    let (arrival, release) = hold(&grant);
    let pending = tokio::spawn({
        let connector = connector.clone();
        async move { connector.bearer("files", &alice()).await }
    });
    within("the refresh to reach the token endpoint", arrival).await.expect("arrived");
    // Meanwhile the user connects again (a callback on another replica).
    let again = alice_connection(&url, "at-new");
    replica.save(alice().key(), "files", &again, now_ms(), Expect::Any).await.expect("saved");
    let _ = release.send(());
    let token = within("the held caller", pending).await.expect("joins").expect("the new connection's token");
    assert_eq!(token.expose(), "at-new");
    let stored = replica.load(alice().key(), "files").await.expect("read").expect("kept");
    assert_eq!(stored.connection.access_token, "at-new", "the refused old grant did not delete the new one");
}

#[tokio::test]
async fn a_fresh_token_refused_again_drops_the_connection_and_asks_to_connect() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (connector, replica) = connector(&store, &sealer);
    connect_alice(&replica, &url).await;
    let principal = alice();
    let fresh = connector.bearer("files", &principal).await.expect("refreshed");
    // Refused again with a token no longer stored: asked, but what is stored now is kept.
    let older = Credential::bearer("at-0");
    let error = connector.refused("files", &principal, &older, Refusal::StillUnauthorized, None).await;
    assert!(matches!(error, Err(UpstreamError::ConnectionRequired { .. })), "{:?}", error.map(|_| "a token"));
    assert!(connector.lookup("files", &principal).await.expect("read").is_some());
    // The token just refreshed refused too: dropped, asked, and no refresh tried.
    let error = connector.refused("files", &principal, &fresh, Refusal::StillUnauthorized, None).await;
    let link = link_of(&replica, error.map(|_| ()).expect_err("asks to connect")).await;
    assert_eq!(link.principal.as_str(), principal.key());
    assert!(connector.lookup("files", &principal).await.expect("read").is_none(), "dropped");
    assert_eq!(refreshes(&grant), 1);
}

#[tokio::test]
async fn a_record_that_does_not_open_counts_as_none_and_is_dropped() {
    use mcpgate_store::Vault as _;
    let store = MemoryStore::new(1);
    // Sealed with a key this replica's ring does not hold (the key left the ring).
    let elsewhere = connector_only(&store, &sealer_of("retired"));
    let (connector, _) = connector(&store, &sealer());
    let key = super::connection_key(alice().key(), "files");
    connect_alice(&elsewhere, "http://127.0.0.1:9/token").await;
    assert!(connector.lookup("files", &alice()).await.expect("read").is_none(), "it does not count");
    assert_eq!(store.vault_get(&key).await.expect("read"), None, "dropped");
    // Corrupted in place: the user is asked to connect again, and it is gone.
    let meta = r#"{"issuer":"https://as.example","connected_at":1}"#;
    store.vault_put(&key, "v1.t.not-sealed", meta, Expect::Absent).await.expect("written");
    let error = connector.bearer("files", &alice()).await.map(|_| ()).expect_err("asks to connect");
    assert!(matches!(error, UpstreamError::ConnectionRequired { .. }), "{error:?}");
    assert_eq!(store.vault_get(&key).await.expect("read"), None, "dropped");
}

#[tokio::test]
async fn a_plain_record_planted_under_a_users_key_is_never_used_nor_its_refresh_token_sent() {
    use mcpgate_store::Vault as _;
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let (seam, connector) = connector(&store, &sealer);
    let key = super::connection_key(alice().key(), "files");
    // Someone with write access to the store and no key: their own account's tokens, in
    // plain JSON under Alice's key, expiring, with a live refresh token for their endpoint.
    let planted = serde_json::to_string(&alice_connection(&url, "attacker-at")).expect("json");
    let meta = r#"{"issuer":"https://as.example","connected_at":1}"#;
    store.vault_put(&key, &planted, meta, Expect::Absent).await.expect("planted");
    assert!(seam.lookup("files", &alice()).await.expect("read").is_none(), "a plain record does not count");
    assert_eq!(store.vault_get(&key).await.expect("read"), None, "dropped");
    store.vault_put(&key, &planted, meta, Expect::Absent).await.expect("planted again");
    let error = seam.bearer("files", &alice()).await.map(|c| c.expose().to_owned()).expect_err("asks to connect");
    assert!(matches!(error, UpstreamError::ConnectionRequired { .. }), "{error:?}");
    assert_eq!(refreshes(&grant), 0, "the planted refresh token was never sent");
    let mut metrics = String::new();
    connector.stats.render(&mut metrics);
    let series =
        r#"mcpgate_oauth_vault_records_refused_total{upstream="files",record="connection",reason="not_sealed"} 2"#;
    assert!(metrics.contains(series), "{metrics}");
}

/// A connector whose upstream `files` has `oauth` as its `[upstream.oauth]`.
fn connector_with(
    store: &MemoryStore,
    sealer: &Sealer,
    oauth: mcpgate_upstream::config::OAuthConfig,
) -> Arc<Connector> {
    let mut config = Config::default();
    let mut upstream = mcpgate_upstream::UpstreamConfig::http("files", "http://127.0.0.1:9/mcp");
    upstream.auth = mcpgate_upstream::config::UpstreamAuth::Oauth;
    upstream.oauth = Some(oauth);
    config.upstream = vec![upstream];
    config.server.public_url = Some("https://gw.example".to_owned());
    config.auth.browser_login.verify_user = false;
    Connector::from_config(&config, AnyStore::Memory(store.clone()), sealer).expect("builds").expect("an upstream")
}

/// Metadata of `https://as.example`: Client ID Metadata Documents taken or not, `iss` sent or
/// not, no registration (so nothing here makes a request).
fn server_metadata(documents: bool, iss: bool) -> mcpgate_upstream::oauth::ServerMetadata {
    serde_json::from_value(json!({
        "issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
        "token_endpoint": "https://as.example/token", "code_challenge_methods_supported": ["S256"],
        "client_id_metadata_document_supported": documents,
        "authorization_response_iss_parameter_supported": iss,
    }))
    .expect("metadata")
}

#[tokio::test]
async fn a_client_whose_redirect_uri_names_no_single_server_is_used_only_where_the_server_sends_iss() {
    use super::client_source::ClientSource;
    let (store, sealer) = (MemoryStore::new(1), sealer());

    // The metadata document: any server taking one accepts it, so only iss tells servers apart.
    let connector = connector_only(&store, &sealer);
    let files = connector.upstreams.get("files").expect("files");
    let (client, source) = connector.client_for(files, &server_metadata(true, true)).await.expect("the document");
    assert_eq!(
        (client.client_id.as_str(), source),
        ("https://gw.example/oauth/client-metadata.json", ClientSource::Metadata)
    );
    let e = connector.client_for(files, &server_metadata(true, false)).await.expect_err("no iss, no registration");
    assert!(format!("{e:?}").contains("does not send iss"), "{e:?}");
    assert_eq!(connector.metadata_redirect_uris(), ["https://gw.example/oauth/callback/files"]);

    // A client id registered beforehand, without the issuer it was registered at.
    let bare = mcpgate_upstream::config::OAuthConfig { client_id: Some("gw".to_owned()), ..Default::default() };
    let connector = connector_with(&store, &sealer, bare.clone());
    let files = connector.upstreams.get("files").expect("files");
    let e = connector.client_for(files, &server_metadata(false, false)).await.expect_err("no iss");
    assert!(format!("{e:?}").contains("[upstream.oauth] issuer"), "{e:?}");
    let (_, source) = connector.client_for(files, &server_metadata(false, true)).await.expect("iss sent");
    assert_eq!(source, ClientSource::Configured);
    assert!(connector.metadata_redirect_uris().is_empty(), "its redirect URI is the operator's, not the document's");

    // Pinned, the redirect URI names the one server: no iss needed.
    let pinned = mcpgate_upstream::config::OAuthConfig { issuer: Some("https://as.example".to_owned()), ..bare };
    let connector = connector_with(&store, &sealer, pinned);
    let files = connector.upstreams.get("files").expect("files");
    let (_, source) = connector.client_for(files, &server_metadata(false, false)).await.expect("pinned");
    assert_eq!(source, ClientSource::Configured);
}
