//! Legacy `tasks/result` waiters: a replica's waiters are shared fairly, so one principal at
//! its own cap (`tasks.max_result_waiters_per_principal`, 429) leaves the others theirs; past
//! the replica's `tasks.max_result_waiters` everyone is refused (503).

use serde_json::json;

use crate::support::{Req, SseStream, app, assert_error, claims, hs, hs256_config};

/// A legacy session of `sub` and one long task of its: (bearer, session, task id).
async fn session_with_task(app: &axum::Router, sub: &str) -> (String, String, String) {
    let bearer = format!("Bearer {}", hs(&claims(sub)));
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "l", "version": "1"}});
    let resp = Req::legacy("initialize", init, None).header("authorization", &bearer).send(app).await;
    let session = resp.header("mcp-session-id").expect("a session").to_owned();
    let call = json!({"name": "slow_report", "arguments": {"topic": "wait", "seconds": 60}, "task": {}});
    let created = Req::legacy("tools/call", call, Some(&session)).header("authorization", &bearer).send(app).await;
    let id = created.result()["task"]["taskId"].as_str().expect("a task").to_owned();
    (bearer, session, id)
}

async fn wait(
    app: &axum::Router,
    (bearer, session, id): &(String, String, String),
) -> Result<SseStream, crate::support::Resp> {
    let req = Req::legacy("tasks/result", json!({"taskId": id}), Some(session)).header("authorization", bearer);
    SseStream::open_or_reply(app, req).await
}

#[tokio::test]
async fn one_principal_cannot_hold_every_result_waiter() {
    let mut c = hs256_config();
    c.tasks.max_result_waiters = 4;
    c.tasks.max_result_waiters_per_principal = 2;
    let app = app(c).await;
    let alice = session_with_task(&app, "alice").await;
    let bob = session_with_task(&app, "bob").await;
    let _held = [wait(&app, &alice).await.expect("a waiter"), wait(&app, &alice).await.expect("a second waiter")];
    let refused = wait(&app, &alice).await.err().expect("alice is at her cap");
    let json = assert_error(&refused, 429, -32600);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("tasks/result"), "{message}");
    assert_eq!(refused.header("retry-after"), Some("5"));
    // Bob still gets his, though alice waits as much as she may.
    let _bobs = wait(&app, &bob).await.expect("bob's waiter");
}

#[tokio::test]
async fn past_the_replicas_result_waiters_everyone_gets_503() {
    let mut c = hs256_config();
    c.tasks.max_result_waiters = 2;
    c.tasks.max_result_waiters_per_principal = 2;
    let app = app(c).await;
    let (alice, bob, carol) = (
        session_with_task(&app, "alice").await,
        session_with_task(&app, "bob").await,
        session_with_task(&app, "carol").await,
    );
    let _held = [wait(&app, &alice).await.expect("alice's waiter"), wait(&app, &bob).await.expect("bob's waiter")];
    // Carol is under her own cap, but the replica's waiters are all taken.
    let refused = wait(&app, &carol).await.err().expect("the replica is at tasks.max_result_waiters");
    let json = assert_error(&refused, 503, -32603);
    assert_eq!(refused.header("retry-after"), Some("1"), "{json}");
}
