//! Upstreams that answer with event streams meant to exhaust the replica: a stand-in server on
//! loopback sends an endless stream of empty `data` lines, an event that never ends, as the
//! answer to a tool call over Streamable HTTP and over a 2024-11-05 HTTP+SSE session, and on
//! a 2025-11-25 session's GET stream (which no call bounds). Each call fails with a clear
//! error, the GET stream is dropped and opened again, and the replica's resident memory stays
//! within a few MB of its idle size while the streams run (it grew without bound before the SSE
//! reader counted every byte against `max_message_bytes`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use mcpgate_e2e::{Client, Gateway, Look, PATIENCE, eventually, next_request, wait_for};

/// The longest a stand-in floods one stream (then it ends it).
const FLOOD_FOR: Duration = Duration::from_secs(15);
/// `max_message_bytes` of both upstreams.
const MAX_MESSAGE: u64 = 1024 * 1024;
/// Growth of the replica's RSS over its idle size that still counts as flat.
const FLAT_KIB: u64 = 8 * 1024;

/// Writes `data\n` lines (an event that never ends) to `socket` for at most [`FLOOD_FOR`],
/// until the peer goes away; counts the bytes into `sent`.
async fn flood(socket: &mut TcpStream, sent: &AtomicU64) {
    let lines = b"data\n".repeat(64 * 1024 / 5);
    let endless = async {
        loop {
            match tokio::time::timeout(Duration::from_secs(1), socket.write_all(&lines)).await {
                Ok(Ok(())) => sent.fetch_add(lines.len() as u64, Ordering::Relaxed),
                Ok(Err(_)) => return,
                Err(_) => continue,
            };
        }
    };
    let _ = tokio::time::timeout(FLOOD_FOR, endless).await;
}

/// A JSON-RPC answer to `request` (a tool list with `flood`, or "method not found").
fn answer(request: &Value) -> Option<Value> {
    let id = request.get("id")?.clone();
    let result = match request["method"].as_str().unwrap_or_default() {
        "server/discover" => json!({"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
            "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "hostile", "version": "1"}}}),
        "initialize" => json!({"protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "hostile", "version": "1"}}),
        "tools/list" => json!({"tools": [{"name": "flood", "inputSchema": {"type": "object"}}]}),
        _ => return Some(json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "not found"}})),
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

async fn respond(socket: &mut TcpStream, status: &str, content_type: &str, body: &str) -> std::io::Result<()> {
    let head = format!("HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", body.len());
    socket.write_all(format!("{head}{body}").as_bytes()).await
}

/// What the stand-in did, for the test to see.
#[derive(Default)]
struct Seen {
    /// Bytes of floods sent.
    flooded: AtomicU64,
    /// GET streams opened at `/session`.
    gets: AtomicU64,
    /// Set by the test: GET streams at `/session` flood (before: keep-alive comments).
    armed: AtomicBool,
}

/// A stand-in upstream on loopback serving three transports: Streamable HTTP at `/mcp`
/// (2026-07-28, answering `tools/call` with the flood); 2024-11-05 HTTP+SSE at `/sse`
/// (answers on the session's stream, where a `tools/call` starts the flood); and a 2025-11-25
/// session at `/session` whose GET stream floods once armed. Returns its address.
async fn hostile(seen: Arc<Seen>) -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    // The current HTTP+SSE session's stream: what to send on it (`None`: the flood).
    let session: Arc<std::sync::Mutex<Option<mpsc::Sender<Option<Value>>>>> = Arc::default();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let (seen, session) = (seen.clone(), session.clone());
            tokio::spawn(async move {
                let sent = &seen.flooded;
                let mut buffer = Vec::new();
                while let Some(request) = next_request(&mut socket, &mut buffer, Duration::from_secs(30)).await {
                    let body: Value = serde_json::from_slice(&request.body).unwrap_or_default();
                    let outcome = match (request.head.split_whitespace().next(), request.path()) {
                        (Some("GET"), "/sse") => {
                            let (tx, mut rx) = mpsc::channel(16);
                            *session.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(tx);
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
                            let _ = socket
                                .write_all(format!("{head}event: endpoint\ndata: /messages\n\n").as_bytes())
                                .await;
                            while let Some(message) = rx.recv().await {
                                let Some(message) = message else { return flood(&mut socket, sent).await };
                                if socket.write_all(format!("data: {message}\n\n").as_bytes()).await.is_err() {
                                    return;
                                }
                            }
                            return;
                        }
                        (Some("POST"), "/messages") => {
                            let stream = session.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
                            let message =
                                if body["method"] == "tools/call" { Some(None) } else { answer(&body).map(Some) };
                            if let (Some(stream), Some(message)) = (stream, message) {
                                let _ = stream.send(message).await;
                            }
                            respond(&mut socket, "202 Accepted", "text/plain", "").await
                        }
                        (Some("POST"), "/mcp") if body["method"] == "tools/call" => {
                            let head =
                                "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
                            if socket.write_all(head.as_bytes()).await.is_ok() {
                                flood(&mut socket, sent).await;
                            }
                            return;
                        }
                        (Some("GET"), "/session") => {
                            seen.gets.fetch_add(1, Ordering::Relaxed);
                            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n";
                            // Keep-alives until armed (for at most four floods' time), then the flood.
                            let idle = async {
                                let mut out = socket.write_all(head.as_bytes()).await;
                                while out.is_ok() {
                                    if seen.armed.load(Ordering::Relaxed) {
                                        return true;
                                    }
                                    tokio::time::sleep(Duration::from_millis(100)).await;
                                    out = socket.write_all(b": keep-alive\n\n").await;
                                }
                                false
                            };
                            if let Ok(true) = tokio::time::timeout(FLOOD_FOR * 4, idle).await {
                                flood(&mut socket, sent).await;
                            }
                            return;
                        }
                        (Some("POST"), "/session") if body["method"] == "initialize" => {
                            let answer = answer(&body).unwrap_or_default().to_string();
                            let head = format!(
                                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: s1\r\n\
                                 Content-Length: {}\r\n\r\n",
                                answer.len()
                            );
                            socket.write_all(format!("{head}{answer}").as_bytes()).await
                        }
                        (Some("POST"), "/mcp" | "/session") => match answer(&body) {
                            Some(answer) => {
                                respond(&mut socket, "200 OK", "application/json", &answer.to_string()).await
                            }
                            None => respond(&mut socket, "202 Accepted", "text/plain", "").await,
                        },
                        _ => respond(&mut socket, "405 Method Not Allowed", "text/plain", "").await,
                    };
                    if outcome.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// Runs `work` while sampling `gateway`'s RSS every 50 ms; returns its output and the peak.
async fn peak_rss_during<T>(gateway: &Gateway, work: impl Future<Output = T>) -> anyhow::Result<(T, u64)> {
    let mut work = std::pin::pin!(work);
    let mut peak = gateway.rss_kib()?;
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tokio::select! {
            out = &mut work => return Ok((out, peak.max(gateway.rss_kib()?))),
            _ = tick.tick() => peak = peak.max(gateway.rss_kib()?),
        }
    }
}

async fn call(client: &Client, url: &str, tool: &str) -> anyhow::Result<Value> {
    let reply = client.modern(url, "tools/call", json!({"name": tool, "arguments": {}})).await?.json()?;
    Ok(reply["result"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_events_fail_the_call_and_leave_memory_flat() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let seen = Arc::new(Seen::default());
    let addr = hostile(seen.clone()).await?;
    let flooded = &seen.flooded;
    let config = format!(
        "[[upstream]]\nname = \"h\"\ntransport = \"http\"\nurl = \"http://{addr}/mcp\"\nmax_message_bytes = {MAX_MESSAGE}\n\n\
         [[upstream]]\nname = \"old\"\ntransport = \"sse\"\nurl = \"http://{addr}/sse\"\nmax_message_bytes = {MAX_MESSAGE}\n\
         event_timeout_secs = 2\n\n\
         [[upstream]]\nname = \"s\"\ntransport = \"http\"\nurl = \"http://{addr}/session\"\nera = \"2025-11-25\"\n\
         max_message_bytes = {MAX_MESSAGE}\nevent_timeout_secs = 2\n"
    );
    let path = dir.path().join("mcpgate.toml");
    std::fs::write(&path, config)?;
    let gateway = Gateway::builder().args(&["--listen", "127.0.0.1:0", "--config", &path.to_string_lossy()]).start()?;
    let (client, url) = (Client::new()?, gateway.url());
    // The gateway's log is printed if this times out (it drops while panicking).
    wait_for("the stand-in's tools to be listed and its GET stream opened", PATIENCE, async || {
        let list = client.modern(&url, "tools/list", json!({})).await?.json()?;
        let names: Vec<&str> =
            list["result"]["tools"].as_array().into_iter().flatten().filter_map(|t| t["name"].as_str()).collect();
        let listening = seen.gets.load(Ordering::Relaxed) > 0;
        let all = names.contains(&"h_flood") && names.contains(&"old_flood") && names.contains(&"s_flood");
        Ok(if all && listening {
            Look::Done(())
        } else {
            Look::NotYet(format!("GET stream open: {listening}; {list}"))
        })
    })
    .await;
    let idle = gateway.rss_kib()?;

    // Streamable HTTP: the call's own stream; the event is too large once it crosses the limit.
    let (result, peak) = peak_rss_during(&gateway, call(&client, &url, "h_flood")).await?;
    let result = result?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    println!("RSS {idle} KiB idle, {peak} KiB at most while flooded ({} bytes sent)", flooded.load(Ordering::Relaxed));
    assert!(peak.saturating_sub(idle) < FLAT_KIB, "RSS grew from {idle} KiB to {peak} KiB");
    assert!(flooded.load(Ordering::Relaxed) > MAX_MESSAGE, "the stand-in flooded too little to tell");
    assert_eq!(result["isError"], true, "{result}");
    assert!(text.contains("larger than max_message_bytes (1048576 bytes)"), "{result}");

    // HTTP+SSE: the session's stream, shared by every call: the event is skipped, then the
    // stream dropped once it has been left unfinished for event_timeout_secs.
    let before = flooded.load(Ordering::Relaxed);
    let (result, peak) = peak_rss_during(&gateway, call(&client, &url, "old_flood")).await?;
    let result = result?;
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    println!("RSS {idle} KiB idle, {peak} KiB at most while flooded ({} bytes sent)", flooded.load(Ordering::Relaxed));
    assert!(peak.saturating_sub(idle) < FLAT_KIB, "RSS grew from {idle} KiB to {peak} KiB");
    assert!(flooded.load(Ordering::Relaxed) - before > MAX_MESSAGE, "the stand-in flooded too little to tell");
    assert_eq!(result["isError"], true, "{result}");
    assert!(text.contains("left an event unfinished for 2 s (event_timeout_secs)"), "{result}");

    // A 2025-11-25 session's GET stream, which no call bounds: flooded, it is dropped once it
    // has left the event unfinished for event_timeout_secs, and opened again.
    let (before, gets) = (flooded.load(Ordering::Relaxed), seen.gets.load(Ordering::Relaxed));
    seen.armed.store(true, Ordering::Relaxed);
    let reopened = async {
        eventually!(seen.gets.load(Ordering::Relaxed) > gets, "the flooded GET stream to be dropped and opened again");
    };
    let ((), peak) = peak_rss_during(&gateway, reopened).await?;
    println!("RSS {idle} KiB idle, {peak} KiB at most while flooded ({} bytes sent)", flooded.load(Ordering::Relaxed));
    assert!(peak.saturating_sub(idle) < FLAT_KIB, "RSS grew from {idle} KiB to {peak} KiB");
    assert!(flooded.load(Ordering::Relaxed) - before > MAX_MESSAGE, "the stand-in flooded too little to tell");
    assert!(gateway.logs().contains("left an event unfinished"), "{}", gateway.logs());
    Ok(())
}
