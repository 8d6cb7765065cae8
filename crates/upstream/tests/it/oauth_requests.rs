//! Requests to an `auth = "oauth"` upstream: each carries the token of the principal it is
//! made for (the handshake too), on that principal's own session; a refused token is reported
//! to the connections and retried once with the token they give back; without a connection,
//! or for the gateway's own list reads, nothing is sent at all.

use std::sync::Arc;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use mcpgate_runtime::Principal;
use mcpgate_upstream::oauth::{Connections as _, Refusal};
use mcpgate_upstream::{Federation, Request, UpstreamAuth, UpstreamConfig, UpstreamError};

use crate::stand_in::{Answer, Seen, StandIn};
use crate::test_connections::TestConnections;

const CHALLENGE: &str =
    r#"Bearer error="invalid_token", resource_metadata="https://files.example/.well-known/oauth-protected-resource""#;

/// A protected 2025-11-25 server: a token of `valid` opens a session of its own
/// (`s-<token>`) and every call on it answers with the token it came with; a token ending in
/// `-narrow` is refused for want of scope (403), one ending in `-barred` is refused the call
/// (a plain 403); any other token, or none, gets 401.
fn protected(valid: &'static [&'static str]) -> impl Fn(&Seen) -> Answer + Send + Sync + 'static {
    move |seen| {
        let id = &seen.body["id"];
        let token = seen.header("authorization").and_then(|v| v.strip_prefix("Bearer ")).unwrap_or_default();
        if !valid.contains(&token) {
            return Answer::status(401).header("www-authenticate", CHALLENGE);
        }
        match seen.method() {
            "server/discover" => Answer::status(400),
            "initialize" => Answer::result(
                id,
                json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                       "serverInfo": {"name": "files", "version": "1"}}),
            )
            .header("mcp-session-id", &format!("s-{token}")),
            _ if seen.header("mcp-session-id") != Some(format!("s-{token}").as_str()) => Answer::status(404),
            "tools/call" if token.ends_with("-narrow") => Answer::status(403)
                .header("www-authenticate", r#"Bearer error="insufficient_scope", scope="files:write""#),
            "tools/call" if token.ends_with("-barred") => Answer::status(403),
            "tools/call" => Answer::result(id, json!({"content": [{"type": "text", "text": token}]})),
            _ => Answer::error(200, id, -32601, "Method not found"),
        }
    }
}

fn federation(url: &str, connections: &Arc<TestConnections>) -> Federation {
    let mut config = UpstreamConfig::http("files", url);
    config.auth = UpstreamAuth::Oauth;
    let federation = Federation::new(vec![config], "_").expect("a valid oauth upstream");
    federation.set_connections(connections.clone());
    federation
}

fn user(name: &str) -> Principal {
    Principal::new("https://issuer.example/", name, Vec::new())
}

async fn whoami(federation: &Federation, principal: &Principal) -> Result<String, UpstreamError> {
    let request =
        Request::new("tools/call", json!({"name": "whoami", "arguments": {}})).name("whoami").caller(principal);
    let raw = federation.upstreams()[0].request(request, &CancellationToken::new()).await?;
    let result: Value = serde_json::from_str(raw.get()).expect("a JSON result");
    Ok(result["content"][0]["text"].as_str().expect("a text answer").to_owned())
}

#[tokio::test]
async fn each_principal_calls_with_its_own_token_on_its_own_session() {
    let server = StandIn::start_seeing(protected(&["alice-1", "bob-1"])).await;
    let connections = Arc::new(TestConnections::default());
    let (alice, bob) = (user("alice"), user("bob"));
    connections.connect(&alice, "alice-1");
    connections.connect(&bob, "bob-1");
    let federation = federation(&server.url, &connections);
    assert_eq!(whoami(&federation, &alice).await.unwrap(), "alice-1");
    assert_eq!(whoami(&federation, &bob).await.unwrap(), "bob-1");
    assert_eq!(whoami(&federation, &alice).await.unwrap(), "alice-1", "alice's session is still hers");
    let seen = server.seen();
    let initializes: Vec<_> =
        seen.iter().filter(|s| s.method() == "initialize").filter_map(|s| s.header("authorization")).collect();
    assert_eq!(initializes, ["Bearer alice-1", "Bearer bob-1"], "each session opened with its owner's token");
    // The protected server answered every call (404 otherwise): a session is never another's.
    assert!(seen.iter().all(|s| s.header("authorization").is_some()), "nothing sent without a token");
    assert!(connections.refusals().is_empty());
}

#[tokio::test]
async fn a_refused_token_is_reported_and_the_request_sent_once_more_with_the_fresh_one() {
    let server = StandIn::start_seeing(protected(&["alice-2"])).await;
    let connections = Arc::new(TestConnections::default());
    let alice = user("alice");
    connections.connect(&alice, "alice-1");
    connections.refreshes_to(&alice, "alice-2");
    let federation = federation(&server.url, &connections);
    assert_eq!(whoami(&federation, &alice).await.unwrap(), "alice-2");
    let refusals = connections.refusals();
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    let (key, stale, refusal, challenge) = &refusals[0];
    assert_eq!((key.as_str(), stale.as_str(), *refusal), (alice.key(), "alice-1", Refusal::Unauthorized));
    let challenge = challenge.as_ref().expect("the challenge travels with the refusal");
    assert_eq!(challenge.error.as_deref(), Some("invalid_token"));
    assert!(challenge.resource_metadata.is_some());
}

#[tokio::test]
async fn a_token_refused_again_after_the_refresh_asks_to_connect() {
    let server = StandIn::start_seeing(protected(&[])).await;
    let connections = Arc::new(TestConnections::default());
    let alice = user("alice");
    connections.connect(&alice, "alice-1");
    let federation = federation(&server.url, &connections);
    match whoami(&federation, &alice).await {
        Err(UpstreamError::ConnectionRequired { upstream, url, .. }) => {
            assert_eq!(upstream, "files");
            assert_eq!(url, TestConnections::link("files", &alice));
        }
        other => panic!("expected ConnectionRequired, got {other:?}"),
    }
    assert_eq!(connections.refusals().len(), 1, "one refusal, then no token to retry with");
}

#[tokio::test]
async fn a_fresh_token_refused_too_is_reported_as_still_refused_and_asks_to_connect() {
    let server = StandIn::start_seeing(protected(&[])).await;
    let connections = Arc::new(TestConnections::default());
    let alice = user("alice");
    connections.connect(&alice, "alice-1");
    connections.refreshes_to(&alice, "alice-2");
    let federation = federation(&server.url, &connections);
    let outcome = whoami(&federation, &alice).await;
    assert!(matches!(outcome, Err(UpstreamError::ConnectionRequired { .. })), "{outcome:?}");
    let refusals: Vec<(String, Refusal)> = connections.refusals().into_iter().map(|r| (r.1, r.2)).collect();
    assert_eq!(
        refusals,
        [("alice-1".to_owned(), Refusal::Unauthorized), ("alice-2".to_owned(), Refusal::StillUnauthorized)]
    );
}

#[tokio::test]
async fn a_403_without_insufficient_scope_is_the_calls_error_not_a_step_up() {
    let server = StandIn::start_seeing(protected(&["alice-barred"])).await;
    let connections = Arc::new(TestConnections::default());
    let alice = user("alice");
    connections.connect(&alice, "alice-barred");
    let federation = federation(&server.url, &connections);
    let outcome = whoami(&federation, &alice).await;
    assert!(
        matches!(&outcome, Err(UpstreamError::Authorization { detail, .. }) if detail.contains("403")),
        "{outcome:?}"
    );
    assert!(connections.refusals().is_empty(), "neither a refresh nor a reconnect changes it");
    assert!(connections.lookup("files", &alice).await.expect("read").is_some(), "the connection is kept");
    // One caller's barred calls say nothing of the upstream's health (the breaker opens after 5).
    for _ in 0..5 {
        assert!(whoami(&federation, &alice).await.is_err());
    }
    assert_eq!(federation.upstreams()[0].breaker_state(), mcpgate_upstream::BreakerState::Closed);
}

#[tokio::test]
async fn a_403_for_want_of_scope_asks_to_connect_with_the_challenge_reported() {
    let server = StandIn::start_seeing(protected(&["alice-narrow"])).await;
    let connections = Arc::new(TestConnections::default());
    let alice = user("alice");
    connections.connect(&alice, "alice-narrow");
    let federation = federation(&server.url, &connections);
    let outcome = whoami(&federation, &alice).await;
    assert!(matches!(outcome, Err(UpstreamError::ConnectionRequired { .. })), "{outcome:?}");
    let refusals = connections.refusals();
    assert_eq!(refusals.len(), 1);
    assert_eq!(refusals[0].2, Refusal::Forbidden);
    assert_eq!(refusals[0].3.as_ref().and_then(|c| c.scope.as_deref()), Some("files:write"));
}

#[tokio::test]
async fn nothing_is_sent_without_a_connection_nor_for_the_gateway_itself() {
    let server = StandIn::start_seeing(protected(&["alice-1"])).await;
    let connections = Arc::new(TestConnections::default());
    let federation = federation(&server.url, &connections);
    let outcome = whoami(&federation, &user("carol")).await;
    assert!(matches!(outcome, Err(UpstreamError::ConnectionRequired { .. })), "{outcome:?}");
    let upstream = &federation.upstreams()[0];
    let lists = upstream.lists(&CancellationToken::new()).await.expect("no list is read, none fails");
    assert!(lists.tools.is_empty());
    let gateway_own = Request::discovery("tools/list", json!({}));
    let outcome = upstream.request(gateway_own, &CancellationToken::new()).await;
    assert!(matches!(outcome, Err(UpstreamError::Authorization { .. })), "{outcome:?}");
    assert!(server.seen().is_empty(), "the upstream saw nothing: {:?}", server.methods());
}
