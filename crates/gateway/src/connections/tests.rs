//! The connector against a real token endpoint on loopback (a small axum server that rotates
//! refresh tokens and, like oidc-provider, revokes the grant when a spent one comes back) and
//! the memory store shared by two connectors, as two replicas share Redis: refreshing is
//! single-flight, a refused refresh asks the user again, a 403 asks for more scopes.

use std::sync::{Arc, Mutex, PoisonError};

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::post;
use serde_json::json;

use mcpgate_runtime::{Credential, Principal};
use mcpgate_seal::{KeyRing, Sealer};
use mcpgate_store::{AnyStore, Expect, MemoryStore};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{BearerChallenge, Connections as _, Refusal};

use super::Connector;
use super::flow::{ConnectLink, Step};
use super::record::Connection;
use crate::config::Config;
use crate::time::now_ms;

/// The token endpoint's state: the one live refresh token and how many refreshes it granted.
#[derive(Default)]
struct Grant {
    live: Option<String>,
    refreshes: u32,
}

type Shared = Arc<Mutex<Grant>>;

async fn token(State(grant): State<Shared>, body: String) -> axum::response::Response {
    let presented =
        body.split('&').find_map(|p| p.strip_prefix("refresh_token=")).map(str::to_owned).unwrap_or_default();
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
    let grant: Shared = Arc::new(Mutex::new(Grant { live: Some("rt-0".to_owned()), refreshes: 0 }));
    let app = axum::Router::new().route("/token", post(token)).with_state(grant.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{addr}/token"), grant)
}

fn connector(store: &MemoryStore, sealer: &Sealer) -> Arc<Connector> {
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
    let now = now_ms();
    let connection = Connection {
        access_token: "at-0".to_owned(),
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
    };
    connector.save(alice().key(), "files", &connection, now, Expect::Absent).await.expect("saved");
}

fn sealer() -> Sealer {
    Sealer::new(KeyRing::generate("t").expect("a key"), 16 * 1024)
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
    let (one, two) = (connector(&store, &sealer), connector(&store, &sealer));
    connect_alice(&one, &url).await;
    let principal = alice();
    let (a, b) = tokio::join!(one.bearer("files", &principal), two.bearer("files", &principal));
    let (a, b) = (a.expect("a token"), b.expect("a token"));
    assert_eq!((a.expose(), b.expose()), ("at-1", "at-1"), "both use the one refresh");
    assert_eq!(grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes, 1);
    // Fresh now: no refresh.
    assert_eq!(one.bearer("files", &principal).await.expect("a token").expose(), "at-1");
    assert_eq!(grant.lock().unwrap_or_else(PoisonError::into_inner).refreshes, 1);
    assert!(one.connected("files", &principal).await.expect("read"));
    assert!(!one.connected("files", &Principal::new("https://id.example", "bob", Vec::new())).await.expect("read"));
}

#[tokio::test]
async fn a_401_uses_a_newer_token_else_refreshes_once_and_a_refused_refresh_asks_again() {
    let (url, grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let connector = connector(&store, &sealer);
    connect_alice(&connector, &url).await;
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
    let link = link_of(&connector, error).await;
    assert_eq!((link.principal.as_str(), link.subject.as_str(), link.scopes), (principal.key(), "alice", None));
    assert!(!connector.connected("files", &principal).await.expect("read"), "the record is gone");
    let error = connector.bearer("files", &principal).await.expect_err("not connected");
    assert!(matches!(error, UpstreamError::ConnectionRequired { .. }), "{error:?}");
}

#[tokio::test]
async fn a_403_asks_to_connect_again_with_the_held_and_the_challenged_scopes() {
    let (url, _grant) = token_endpoint().await;
    let (store, sealer) = (MemoryStore::new(1), sealer());
    let connector = connector(&store, &sealer);
    connect_alice(&connector, &url).await;
    let challenge = BearerChallenge { scope: Some("b a".to_owned()), ..BearerChallenge::default() };
    let stale = Credential::bearer("at-0");
    let error =
        connector.refused("files", &alice(), &stale, Refusal::Forbidden, Some(&challenge)).await.expect_err("step-up");
    let link = link_of(&connector, error).await;
    assert_eq!(link.scopes.as_deref(), Some("a b"));
    // A link is good once.
    let UpstreamError::ConnectionRequired { url, .. } =
        connector.bearer("files", &Principal::new("https://id.example", "bob", Vec::new())).await.expect_err("bob")
    else {
        panic!("ConnectionRequired");
    };
    let sealed = url.rsplit('/').next().expect("a sealed link");
    assert!(connector.open_flow::<ConnectLink>(Step::Link, sealed).await.is_ok());
    assert!(connector.open_flow::<ConnectLink>(Step::Link, sealed).await.is_err(), "replayed");
}
