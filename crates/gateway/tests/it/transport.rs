//! Transport-level rejections: each checks the HTTP status and the JSON-RPC code.

use axum::body::Body;
use axum::http::Method;
use bytes::Bytes;
use futures_util::{StreamExt, stream};
use mcpgate_store::testing::wait::{Look, wait_for};
use serde_json::json;

use crate::support::{Req, app, assert_error, assert_error_without_id, config};

#[tokio::test]
async fn get_and_delete_are_405_with_allow() {
    let app = app(config()).await;
    for method in [Method::GET, Method::DELETE, Method::PUT] {
        let resp = Req::post("").method(method.clone()).send(&app).await;
        assert_error_without_id(&resp, 405, -32600);
        assert_eq!(resp.header("allow"), Some("POST"), "{method}");
    }
}

#[tokio::test]
async fn wrong_content_type_is_415() {
    let app = app(config()).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}).to_string();
    for ct in [Some("text/plain"), Some("application/x-www-form-urlencoded"), None] {
        let req = Req::post(body.clone()).without("content-type");
        let req = match ct {
            Some(ct) => req.header("content-type", ct),
            None => req,
        };
        assert_error_without_id(&req.send(&app).await, 415, -32600);
    }
    // Parameters on the media type are fine.
    let resp =
        Req::modern("tools/list", json!({})).header("content-type", "application/json; charset=utf-8").send(&app).await;
    assert!(resp.result()["tools"].is_array());
}

#[tokio::test]
async fn malformed_json_is_400_parse_error() {
    let app = app(config()).await;
    for body in ["{not json", "", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\"} trailing"] {
        let json = assert_error(&Req::post(body.to_owned()).send(&app).await, 400, -32700);
        assert!(json.get("id").is_none(), "no id can be read from {body:?}: {json}");
    }
}

#[tokio::test]
async fn batches_are_rejected_clearly() {
    let app = app(config()).await;
    let body = json!([{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]).to_string();
    let json = assert_error(&Req::post(body).send(&app).await, 400, -32600);
    assert!(json["error"]["message"].as_str().expect("message").contains("batch"), "{json}");
}

#[tokio::test]
async fn invalid_envelopes_are_400_invalid_request_with_id_when_readable() {
    let app = app(config()).await;
    let json =
        assert_error(&Req::post(r#"{"jsonrpc":"1.0","id":5,"method":"tools/list"}"#).send(&app).await, 400, -32600);
    assert_eq!(json["id"], 5);
    let json =
        assert_error(&Req::post(r#"{"jsonrpc":"2.0","id":null,"method":"tools/list"}"#).send(&app).await, 400, -32600);
    assert!(json.get("id").is_none(), "{json}");
    assert_error(&Req::post("42").send(&app).await, 400, -32600);
}

#[tokio::test]
async fn oversized_bodies_are_413() {
    let mut c = config();
    c.http.body_limit_bytes = 2048;
    let app = app(c).await;
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"text": "x".repeat(4096)}}});
    // Declared length over the limit: refused before reading.
    assert_error_without_id(&Req::post(big.to_string()).send(&app).await, 413, -32600);
    // Chunked body with no length: refused once the limit is crossed.
    let chunks: Vec<Result<Bytes, std::io::Error>> =
        big.to_string().into_bytes().chunks(512).map(|c| Ok(Bytes::copy_from_slice(c))).collect();
    let resp = Req::post(Body::from_stream(stream::iter(chunks))).send(&app).await;
    assert_error_without_id(&resp, 413, -32600);
}

#[tokio::test]
async fn default_body_limit_is_4_mib() {
    let app = app(config()).await;
    let text = "x".repeat(4 * 1024 * 1024);
    let big = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"pad": text}});
    assert_error_without_id(&Req::post(big.to_string()).send(&app).await, 413, -32600);
}

#[tokio::test]
async fn foreign_origin_and_host_are_403() {
    let app = app(config()).await;
    let resp = Req::modern("tools/list", json!({})).header("origin", "http://evil.example.com").send(&app).await;
    assert_error_without_id(&resp, 403, -32600);
    let resp = Req::modern("tools/list", json!({})).header("origin", "null").send(&app).await;
    assert_error_without_id(&resp, 403, -32600);
    let resp = Req::modern("tools/list", json!({})).header("host", "evil.example.com").send(&app).await;
    assert_error_without_id(&resp, 403, -32600);
    // Loopback names and origins are accepted on a loopback listener.
    for (host, origin) in [
        ("localhost:8080", "http://localhost:8080"),
        ("127.0.0.1:9", "http://127.0.0.1:9"),
        ("[::1]:80", "https://[::1]"),
    ] {
        let resp = Req::modern("tools/list", json!({})).header("host", host).header("origin", origin).send(&app).await;
        assert!(resp.result()["tools"].is_array(), "{host} {origin}");
    }
}

#[tokio::test]
async fn configured_origins_and_hosts() {
    let mut c = config();
    c.http.allowed_origins = vec!["https://app.example.com".to_owned()];
    c.http.allowed_hosts = vec!["mcp.example.com".to_owned()];
    let app = app(c).await;
    let ok = Req::modern("tools/list", json!({}))
        .header("host", "mcp.example.com")
        .header("origin", "https://APP.example.com");
    assert!(ok.send(&app).await.result()["tools"].is_array());
    let bad =
        Req::modern("tools/list", json!({})).header("host", "mcp.example.com").header("origin", "http://localhost:1");
    assert_error_without_id(&bad.send(&app).await, 403, -32600);
    assert_error_without_id(&Req::modern("tools/list", json!({})).send(&app).await, 403, -32600);
}

#[tokio::test]
async fn unacceptable_accept_is_406() {
    let app = app(config()).await;
    let resp = Req::modern("tools/list", json!({})).header("accept", "text/html").send(&app).await;
    assert_error_without_id(&resp, 406, -32600);
    let resp = Req::modern("tools/list", json!({})).header("accept", "application/json;q=0").send(&app).await;
    assert_error_without_id(&resp, 406, -32600);
    // No Accept at all means JSON.
    let resp = Req::modern("tools/list", json!({})).without("accept").send(&app).await;
    assert!(resp.result()["tools"].is_array());
}

#[tokio::test]
async fn sse_only_clients_get_one_event() {
    let app = app(config()).await;
    let resp = Req::modern("tools/list", json!({})).header("accept", "text/event-stream").send(&app).await;
    let events = resp.sse();
    assert_eq!(events.len(), 1);
    assert!(events[0]["result"]["tools"].is_array());
}

#[tokio::test]
async fn notifications_and_responses_are_202() {
    let app = app(config()).await;
    for body in [
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}"#,
        r#"{"jsonrpc":"2.0","id":"s-1","result":{}}"#,
    ] {
        let resp = Req::post(body.to_owned()).send(&app).await;
        assert_eq!(resp.status.as_u16(), 202, "{body}");
        assert!(resp.body.is_empty());
    }
}

#[tokio::test]
async fn saturation_is_503_with_retry_after() {
    use crate::support::app_with;
    let mut c = config();
    c.http.max_concurrent_requests = 1;
    let (app, _) = app_with(c, |_| {}).await;
    // Hold the only slot with a streamed call, then ask again.
    let req = Req::modern(
        "tools/call",
        json!({"name": "slow_report", "arguments": {"topic": "t", "seconds": 2}, "_meta": {"progressToken": 1}}),
    )
    .into_request();
    let held = tower::ServiceExt::oneshot(app.clone(), req).await.expect("infallible");
    assert_eq!(held.headers()["content-type"], "text/event-stream");
    let resp = Req::modern("tools/list", json!({})).send(&app).await;
    assert_error_without_id(&resp, 503, -32603);
    assert_eq!(resp.header("retry-after"), Some("1"));
    drop(held);
}

/// A body that sends `first` and then never finishes.
fn stalled(first: &str) -> Body {
    let head = stream::once(std::future::ready(Ok::<_, std::io::Error>(Bytes::from(first.to_owned()))));
    Body::from_stream(head.chain(stream::pending()))
}

// The body timeout runs on tokio's clock: paused, the 1 s passes without waiting for it.
#[tokio::test(start_paused = true)]
async fn slow_bodies_time_out_with_408() {
    let mut c = config();
    c.http.body_timeout_secs = 1;
    let app = app(c).await;
    let resp = Req::post(stalled(r#"{"jsonrpc":"2.0","#)).header("content-length", "500").send(&app).await;
    assert_error_without_id(&resp, 408, -32600);
}

#[tokio::test]
async fn buffered_body_bytes_are_bounded() {
    let mut c = config();
    c.http.body_limit_bytes = 1024;
    c.http.max_buffered_body_bytes = 1024;
    c.http.body_timeout_secs = 10;
    let app = app(c).await;
    // One slow upload reserves most of the budget...
    let slow = Req::post(stalled("{")).header("content-length", "1000").into_request();
    let held = tokio::spawn(tower::ServiceExt::oneshot(app.clone(), slow));
    // ...so, once it has (polled, bounded; until then requests are answered), another body
    // that does not fit in what is left is refused.
    let resp = wait_for("the slow upload to reserve the budget", std::time::Duration::from_secs(20), async || {
        let resp = Req::modern("tools/list", json!({})).send(&app).await;
        if resp.status.as_u16() == 503 {
            return Look::Done(resp);
        }
        assert!(resp.result()["tools"].is_array(), "answered while the budget lasts");
        Look::NotYet(format!("{} {}", resp.status, resp.json()))
    })
    .await;
    assert_error_without_id(&resp, 503, -32603);
    held.abort();
    let _ = held.await;
    // Once the slow upload is gone, bodies fit again.
    let resp = Req::modern("tools/list", json!({})).send(&app).await;
    assert!(resp.result()["tools"].is_array());
}
