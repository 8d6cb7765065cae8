//! The connections of a plain-`http` upstream: calls reuse kept-alive connections (never more
//! at once than calls in flight), a connection the upstream closed is replaced without failing
//! the call, and an answer over `max_message_bytes` fails its call and closes its connection
//! (its unread rest is never taken for the next answer).

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_upstream::{Request, Upstream, UpstreamConfig};

use crate::stand_in::{Answer, StandIn};

/// A 2026-07-28 server with one tool, `echo`, answering `{"text": ...}` with that text; a
/// call of `big` answers 256 KiB of text (more than one read takes).
fn modern(body: &Value) -> Answer {
    let id = &body["id"];
    match body["method"].as_str() {
        Some("server/discover") => Answer::result(
            id,
            json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}),
        ),
        Some("tools/call") => {
            let text = match body["params"]["name"].as_str() {
                Some("big") => "x".repeat(256 * 1024),
                _ => body["params"]["arguments"]["text"].as_str().unwrap_or_default().to_owned(),
            };
            Answer::result(id, json!({"resultType": "complete", "content": [{"type": "text", "text": text}]}))
        }
        _ => Answer::error(404, id, -32601, "Method not found"),
    }
}

async fn echo(up: &Upstream, text: &str) -> Result<String, mcpgate_upstream::UpstreamError> {
    let params = json!({"name": "echo", "arguments": {"text": text}});
    let raw = up.request(Request::new("tools/call", params).name("echo"), &CancellationToken::new()).await?;
    let result: Value = serde_json::from_str(raw.get()).expect("JSON");
    Ok(result["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

/// Waits (bounded) until the stand-in counted `n` closed connections.
async fn closed(server: &StandIn, n: u64) {
    wait_every(
        format_args!("the stand-in to count {n} closed connections"),
        Duration::from_secs(10),
        Duration::from_millis(5),
        async || {
            let closed = server.closed();
            if closed >= n { Look::Done(()) } else { Look::NotYet(format!("{closed} closed")) }
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_reuse_kept_connections_never_more_than_calls_in_flight() {
    let server = StandIn::start(modern).await;
    let mut config = UpstreamConfig::http("up", &server.url);
    config.max_concurrency = 3;
    let up = std::sync::Arc::new(Upstream::new(config).unwrap());
    for i in 0..5 {
        assert_eq!(echo(&up, &format!("one {i}")).await.unwrap(), format!("one {i}"));
    }
    assert_eq!(server.accepted(), 1, "one connection for the handshake and five calls in a row");
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let up = up.clone();
            tokio::spawn(async move { (i, echo(&up, &format!("many {i}")).await) })
        })
        .collect();
    for call in calls {
        let (i, text) = call.await.unwrap();
        assert_eq!(text.unwrap(), format!("many {i}"), "each answer reaches its own call");
    }
    let opened = server.accepted();
    assert!(opened <= 3, "at most max_concurrency (3) connections for 12 calls: {opened}");
    for i in 0..5 {
        echo(&up, &format!("again {i}")).await.unwrap();
    }
    assert_eq!(server.accepted(), opened, "the kept connections serve later calls");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_upstream_closed_is_replaced() {
    let server = StandIn::start_closing(modern).await;
    let up = Upstream::new(UpstreamConfig::http("up", &server.url)).unwrap();
    for i in 0..3u64 {
        assert_eq!(echo(&up, &format!("call {i}")).await.unwrap(), format!("call {i}"));
        // The handshake's connection and each call's were closed after their answer.
        closed(&server, i + 2).await;
    }
    assert_eq!(server.accepted(), 4, "a new connection for each call after its predecessor was closed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_over_the_bound_fails_its_call_and_its_connection_is_not_reused() {
    let server = StandIn::start(modern).await;
    let mut config = UpstreamConfig::http("up", &server.url);
    config.max_message_bytes = 1024;
    let up = Upstream::new(config).unwrap();
    assert_eq!(echo(&up, "small").await.unwrap(), "small");
    let big = json!({"name": "big", "arguments": {}});
    let e = up.request(Request::new("tools/call", big).name("big"), &CancellationToken::new()).await.unwrap_err();
    assert!(e.to_string().contains("larger than max_message_bytes (1024 bytes)"), "{e}");
    closed(&server, 1).await;
    assert_eq!(echo(&up, "after").await.unwrap(), "after", "the next call is not served the unread rest");
    assert_eq!(server.accepted(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_whose_answer_names_another_request_is_not_reused() {
    // `stray` is answered with another request's id: what that connection carries is out of
    // step with its requests, so it must never serve the next call.
    let server = StandIn::start(|body: &Value| match body["params"]["name"].as_str() {
        Some("stray") => {
            let other = body["id"].as_u64().unwrap_or(0) + 1000;
            Answer::result(&json!(other), json!({"resultType": "complete", "content": []}))
        }
        _ => modern(body),
    })
    .await;
    let up = Upstream::new(UpstreamConfig::http("up", &server.url)).unwrap();
    assert_eq!(echo(&up, "before").await.unwrap(), "before");
    assert_eq!(server.accepted(), 1, "the handshake's connection serves the first call");
    let stray = json!({"name": "stray", "arguments": {}});
    let e = up.request(Request::new("tools/call", stray).name("stray"), &CancellationToken::new()).await.unwrap_err();
    assert!(e.to_string().contains("not the answer to the request"), "{e}");
    // No wait for the close here: the stand-in closes an idle connection by itself after 10 s.
    assert_eq!(echo(&up, "after").await.unwrap(), "after");
    assert_eq!(server.accepted(), 2, "the next call went out on a new connection");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_list_refresh_that_reaches_the_upstream_closes_its_open_breaker() {
    let down = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let state = down.clone();
    let server = StandIn::start(move |body: &Value| {
        if state.load(std::sync::atomic::Ordering::SeqCst) { Answer::status(503) } else { modern(body) }
    })
    .await;
    let mut config = UpstreamConfig::http("up", &server.url);
    config.breaker_failures = 2;
    // Far longer than the test: only the refresh can close it within it.
    config.breaker_cooldown_secs = 3600;
    let up = Upstream::new(config).unwrap();
    assert_eq!(echo(&up, "up").await.unwrap(), "up");
    down.store(true, std::sync::atomic::Ordering::SeqCst);
    for _ in 0..2 {
        echo(&up, "down").await.unwrap_err();
    }
    assert_eq!(up.breaker_state(), mcpgate_upstream::BreakerState::Open);
    let fast = echo(&up, "refused").await.unwrap_err();
    assert!(matches!(fast, mcpgate_upstream::UpstreamError::CircuitOpen { .. }), "{fast}");
    // The upstream comes back; the list refresh reaches it and closes the breaker.
    down.store(false, std::sync::atomic::Ordering::SeqCst);
    up.lists(&CancellationToken::new()).await.expect("the refresh reads the lists of an upstream that is back");
    assert_eq!(up.breaker_state(), mcpgate_upstream::BreakerState::Closed);
    assert_eq!(echo(&up, "back").await.unwrap(), "back", "calls flow again at once");
}
