//! [`Connections`] against a real TCP peer on loopback that speaks just enough HTTP/1.1: the
//! request goes out as `Client` sends it, a connection is kept and reused, a request finds its
//! way onto a fresh connection when the idle one was closed, and bounds hold.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use mcpgate_client::{ClientError, Connections, McpRequest};

use crate::wire::take_head;

/// How long any one step of a test may take.
const PATIENCE: Duration = Duration::from_secs(10);

/// How the peer treats a connection after each reply.
#[derive(Clone, Copy)]
enum After {
    /// Keeps it open for the next request.
    KeepAlive,
    /// Closes it (without saying so in the reply).
    Close,
}

/// A peer that answers every request with `body` (as JSON); counts connections and requests,
/// and keeps the head and body of the last request.
struct Peer {
    url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
    last: Arc<std::sync::Mutex<(String, String)>>,
}

async fn peer(body: &'static str, after: After) -> Peer {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind loopback");
    let url = format!("http://{}/mcp?x=1", listener.local_addr().expect("address"));
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let last = Arc::new(std::sync::Mutex::new((String::new(), String::new())));
    let (c, r, l) = (connections.clone(), requests.clone(), last.clone());
    tokio::spawn(async move {
        loop {
            let Ok((socket, _)) = listener.accept().await else { return };
            c.fetch_add(1, Ordering::SeqCst);
            let (r, l) = (r.clone(), l.clone());
            tokio::spawn(serve(socket, body, after, r, l));
        }
    });
    Peer { url, connections, requests, last }
}

async fn serve(
    mut socket: TcpStream,
    body: &'static str,
    after: After,
    requests: Arc<AtomicUsize>,
    last: Arc<std::sync::Mutex<(String, String)>>,
) {
    let mut bytes = Vec::new();
    let mut buf = [0_u8; 4096];
    loop {
        let (head, length) = loop {
            if let Some(head) = take_head(&mut bytes) {
                break head;
            }
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        };
        while bytes.len() < length {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
            }
        }
        let request_body: Vec<u8> = bytes.drain(..length).collect();
        *last.lock().expect("not poisoned") = (head, String::from_utf8_lossy(&request_body).into_owned());
        requests.fetch_add(1, Ordering::SeqCst);
        let reply = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        if socket.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
        if let After::Close = after {
            let _ = socket.shutdown().await;
            return;
        }
    }
}

async fn send(connections: &Connections, request: &McpRequest) -> Result<mcpgate_client::Reply, ClientError> {
    tokio::time::timeout(PATIENCE, connections.send(request)).await.expect("an answer within PATIENCE")
}

#[tokio::test]
async fn a_request_goes_out_as_the_client_sends_it_and_the_connection_is_reused() {
    let peer = peer(r#"{"jsonrpc":"2.0","id":"q-1","result":{"content":[]}}"#, After::KeepAlive).await;
    let connections = Connections::new(&peer.url).expect("a plain http URL").max_idle(2);
    let request = McpRequest::modern("q-1", "tools/call", json!({"name": "héllo", "arguments": {}}))
        .header("authorization", "Bearer t");
    for _ in 0..3 {
        let reply = send(&connections, &request).await.expect("a reply");
        assert_eq!(reply.status, 200);
        assert_eq!(reply.response(request.id()).map(|r| r.outcome), Some(Ok(json!({"content": []}))));
    }
    let (head, body) = peer.last.lock().expect("not poisoned").clone();
    assert!(head.starts_with("POST /mcp?x=1 HTTP/1.1"), "{head}");
    for line in [
        "content-type: application/json",
        "accept: application/json, text/event-stream",
        "mcp-protocol-version: 2026-07-28",
        "mcp-method: tools/call",
        "mcp-name: =?base64?aMOpbGxv?=",
        "authorization: Bearer t",
    ] {
        assert!(head.lines().any(|l| l.eq_ignore_ascii_case(line)), "{line:?} not in\n{head}");
    }
    assert!(head.lines().any(|l| l.to_ascii_lowercase().starts_with("host: 127.0.0.1:")), "{head}");
    let body: Value = serde_json::from_str(&body).expect("a JSON body");
    assert_eq!(body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"], "2026-07-28");
    assert_eq!(body["id"], "q-1");
    assert_eq!(peer.requests.load(Ordering::SeqCst), 3);
    assert_eq!(peer.connections.load(Ordering::SeqCst), 1, "one keep-alive connection served all three");
}

#[tokio::test]
async fn a_request_after_the_server_closed_the_idle_connection_goes_on_a_fresh_one() {
    let peer = peer(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#, After::Close).await;
    let connections = Connections::new(&peer.url).expect("a plain http URL");
    let request = McpRequest::modern(1, "tools/list", json!({}));
    for round in 1..=3 {
        // Let the peer's close reach the idle connection first.
        if round > 1 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let reply = send(&connections, &request).await.expect("a reply on a fresh connection");
        assert_eq!(reply.response(&1.into()).map(|r| r.outcome), Some(Ok(json!({}))));
    }
    assert_eq!(peer.requests.load(Ordering::SeqCst), 3, "each request reached the peer exactly once");
    assert_eq!(peer.connections.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn bounds_hold_and_other_urls_are_refused() {
    let big =
        Box::leak(format!(r#"{{"jsonrpc":"2.0","id":1,"result":{{"text":"{}"}}}}"#, "x".repeat(4096)).into_boxed_str());
    let peer = peer(big, After::KeepAlive).await;
    let small = Connections::new(&peer.url).expect("a plain http URL").max_body(1024);
    let error = send(&small, &McpRequest::modern(1, "tools/list", json!({}))).await.expect_err("too large");
    assert!(matches!(error, ClientError::TooLarge { max: 1024 }), "{error}");

    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("address").port();
    let refused = Connections::new(&format!("http://127.0.0.1:{port}/mcp")).expect("a plain http URL");
    let error = send(&refused, &McpRequest::modern(1, "tools/list", json!({}))).await.expect_err("refused");
    assert!(matches!(error, ClientError::Exchange { .. }), "{error}");

    assert!(Connections::new("https://example.com/mcp").is_none(), "TLS is the reqwest client's");
    assert!(Connections::new("http://user:pw@127.0.0.1/mcp").is_none(), "no credentials in URLs");
    assert!(Connections::new("not a url").is_none());
}
