//! One real TCP listener per test that records the request it gets and answers with fixed
//! bytes, so the client's side of the wire is checked without a mock HTTP stack.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;

use mcpgate_client::{Client, ClientError, McpRequest};

/// How long any one step of a test may take.
const PATIENCE: Duration = Duration::from_secs(10);

/// A request as the peer received it: its head and body.
struct Received {
    head: String,
    body: String,
}

/// Serves one connection: reads one request, answers `reply`, closes.
async fn peer(reply: Vec<u8>) -> (String, tokio::task::JoinHandle<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let url = format!("http://{}/mcp", listener.local_addr().expect("address"));
    let served = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("a connection");
        let mut bytes = Vec::new();
        let mut buf = [0_u8; 4096];
        let (head, length) = loop {
            let n = socket.read(&mut buf).await.expect("reads");
            assert!(n > 0, "the request ended before its head");
            bytes.extend_from_slice(&buf[..n]);
            if let Some(head) = take_head(&mut bytes) {
                break head;
            }
        };
        while bytes.len() < length {
            let n = socket.read(&mut buf).await.expect("reads");
            assert!(n > 0, "the body ended early");
            bytes.extend_from_slice(&buf[..n]);
        }
        // A client that gave up reading (a body over its bound) may have closed already.
        let _ = socket.write_all(&reply).await;
        let _ = socket.shutdown().await;
        Received { head, body: String::from_utf8_lossy(&bytes).into_owned() }
    });
    (url, served)
}

fn http_reply(status: &str, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut text = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n", body.len());
    for (k, v) in headers {
        text.push_str(&format!("{k}: {v}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    text.into_bytes()
}

fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new(reqwest::Client::builder().timeout(PATIENCE).build().expect("an HTTP client"))
}

async fn received(served: tokio::task::JoinHandle<Received>) -> Received {
    tokio::time::timeout(PATIENCE, served).await.expect("the peer served within PATIENCE").expect("the peer ran")
}

#[tokio::test]
async fn a_modern_request_goes_out_with_its_headers_and_a_json_reply_is_read() {
    let answer = r#"{"jsonrpc":"2.0","id":"q-1","result":{"content":[]}}"#;
    let (url, served) = peer(http_reply("200 OK", &[("content-type", "application/json")], answer)).await;
    let request = McpRequest::modern("q-1", "tools/call", json!({"name": "héllo", "arguments": {}}))
        .header("authorization", "Bearer t");
    let reply = client().send(&url, &request).await.expect("a reply");
    let got = received(served).await;
    for line in [
        "content-type: application/json",
        "accept: application/json, text/event-stream",
        "mcp-protocol-version: 2026-07-28",
        "mcp-method: tools/call",
        "mcp-name: =?base64?aMOpbGxv?=",
        "authorization: Bearer t",
    ] {
        // hyper writes header names lowercase, as reqwest stores them.
        assert!(got.head.lines().any(|l| l == line), "{line:?} not in\n{}", got.head);
    }
    assert!(!got.head.contains("mcp-session-id"), "no session in 2026-07-28");
    let body: Value = serde_json::from_str(&got.body).expect("a JSON body");
    assert_eq!(body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(reply.status, 200);
    assert_eq!(reply.response(request.id()).map(|r| r.outcome), Some(Ok(json!({"content": []}))));
}

#[tokio::test]
async fn a_legacy_reply_on_a_stream_yields_its_session_and_answer() {
    let stream = "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n\
                  data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{\"protocolVersion\":\"2025-11-25\"}}\n\n";
    let headers = [("content-type", "text/event-stream"), ("mcp-session-id", "s-42")];
    let (url, served) = peer(http_reply("200 OK", &headers, stream)).await;
    let request = McpRequest::legacy(7, "initialize", json!({}), None);
    let reply = client().send(&url, &request).await.expect("a reply");
    let got = received(served).await;
    assert!(!got.head.contains("mcp-protocol-version"), "initialize names no version header");
    assert_eq!(reply.session.as_deref(), Some("s-42"));
    assert_eq!(reply.response(&7.into()).map(|r| r.outcome), Some(Ok(json!({"protocolVersion": "2025-11-25"}))));
}

#[tokio::test]
async fn an_error_status_is_a_reply_and_an_oversized_body_an_error() {
    let (url, served) = peer(http_reply("503 Service Unavailable", &[("retry-after", "1")], "")).await;
    let reply = client().send(&url, &McpRequest::modern(1, "tools/list", json!({}))).await.expect("a reply");
    received(served).await;
    assert_eq!((reply.status, reply.retry_after.as_deref()), (503, Some("1")));
    assert_eq!(reply.response(&1.into()), None);

    let big = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{}"}}}}"#, "x".repeat(4096));
    let (url, served) = peer(http_reply("200 OK", &[("content-type", "application/json")], &big)).await;
    let small = client().max_body(1024);
    let error = small.send(&url, &McpRequest::modern(1, "tools/list", json!({}))).await.expect_err("too large");
    received(served).await;
    assert!(matches!(error, ClientError::TooLarge { max: 1024 }), "{error}");
}

#[tokio::test]
async fn nothing_listening_is_a_send_error() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let error = client().send(&url, &McpRequest::modern(1, "tools/list", json!({}))).await.expect_err("refused");
    assert!(matches!(error, ClientError::Send { .. }), "{error}");
}

/// Takes a complete request head off the front of `bytes`: its text and its `Content-Length`
/// (0 without one); `None` while the head is incomplete.
pub(crate) fn take_head(bytes: &mut Vec<u8>) -> Option<(String, usize)> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&bytes[..end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length:").map(str::to_owned))
        .map_or(0, |v| v.trim().parse::<usize>().expect("a length"));
    bytes.drain(..end + 4);
    Some((head, length))
}
