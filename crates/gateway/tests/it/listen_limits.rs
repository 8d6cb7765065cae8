//! What bounds `subscriptions/listen` streams, as the README's error table documents it: the
//! replica's `http.max_listeners` (503, `Retry-After: 1`), one caller's share of them
//! (`http.max_listeners_per_principal`: 429, `Retry-After: 5`), and at most 100 `taskIds` per
//! stream (200, -32602). Each refusal is checked for HTTP status, JSON-RPC code, echoed id and
//! headers; each bound is shown to be the bound (one fewer is admitted).

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_for};
use serde_json::{Value, json};

use crate::support::{Req, Resp, SseStream, app, assert_error, claims, config, hs, hs256_config};

/// How long a test waits for a released slot to come back: liveness, not speed.
const LIVENESS: Duration = Duration::from_secs(20);

fn with_ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// Opens a listen stream for tool list changes (as `sub` when given): the stream, its
/// acknowledgement read, or the response that refused it.
async fn listen(app: &axum::Router, sub: Option<&str>, notifications: Value) -> Result<SseStream, Resp> {
    let mut req = Req::modern_with("subscriptions/listen", json!({"notifications": notifications}), with_ext());
    if let Some(sub) = sub {
        req = req.header("authorization", &format!("Bearer {}", hs(&claims(sub))));
    }
    let mut stream = SseStream::open_or_reply(app, req).await?;
    let ack = stream.next().await.expect("the acknowledgement opens the stream");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    Ok(stream)
}

fn tools() -> Value {
    json!({"toolsListChanged": true})
}

#[tokio::test]
async fn the_replicas_listen_streams_are_bounded_with_503() {
    let mut c = config();
    c.http.max_listeners = 2;
    let app = app(c).await;
    let first = listen(&app, None, tools()).await.expect("a first stream");
    let _second = listen(&app, None, tools()).await.expect("a second stream: the bound is 2");
    let refused = listen(&app, None, tools()).await.err().expect("a third is over http.max_listeners");
    let json = assert_error(&refused, 503, -32603);
    assert_eq!(refused.header("retry-after"), Some("1"), "{json}");
    // A stream that ends gives its slot back (once its task sees the client gone).
    drop(first);
    wait_for("the closed stream's slot to be back", LIVENESS, async || match listen(&app, None, tools()).await {
        Ok(_) => Look::Done(()),
        Err(refused) => Look::NotYet(assert_error(&refused, 503, -32603).to_string()),
    })
    .await;
}

#[tokio::test]
async fn one_caller_over_its_share_of_listen_streams_gets_429() {
    let mut c = hs256_config();
    c.http.max_listeners = 4;
    c.http.max_listeners_per_principal = 2;
    let app = app(c).await;
    let _alice = [
        listen(&app, Some("alice"), tools()).await.expect("alice's first stream"),
        listen(&app, Some("alice"), tools()).await.expect("alice's second stream: her share is 2"),
    ];
    let refused = listen(&app, Some("alice"), tools()).await.err().expect("alice is at her share");
    let json = assert_error(&refused, 429, -32600);
    assert_eq!(refused.header("retry-after"), Some("5"), "{json}");
    // The replica still has room for others.
    let _bob = listen(&app, Some("bob"), tools()).await.expect("bob's stream, though alice holds her share");
}

#[tokio::test]
async fn a_listen_stream_watches_at_most_100_task_ids() {
    let app = app(config()).await;
    let ids = |n: usize| (0..n).map(|i| format!("t-{i}")).collect::<Vec<_>>();
    let refused = listen(&app, None, json!({"taskIds": ids(101)})).await.err().expect("101 taskIds are refused");
    let json = assert_error(&refused, 200, -32602);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("100 taskIds"), "{message}");
    // 100 is the bound: admitted (unknown ids are left out of the acknowledgement).
    let _open = listen(&app, None, json!({"taskIds": ids(100)})).await.expect("100 taskIds are admitted");
}
