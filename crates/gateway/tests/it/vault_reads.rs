//! How often a federated `auth = "oauth"` request reads the caller's connection from the
//! vault, against a real `redis-server` (counted from its own `MONITOR` feed: every `HMGET` of
//! a connection entry) and a protected upstream on loopback that takes only the caller's token:
//! a `tools/call` of the caller's own tool reads the record once (the tool and the credential
//! are looked up together, then shared by the audit, the policy and the call), with the audit
//! trail on or off; a `tools/list` reads it once per `oauth` upstream, whether the caller's
//! list there is kept or read anew (its pages go with the token that one read found).

use axum::Json;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::sync::mpsc;

use mcpgate::config::{AuditConfig, AuditSink, Secret};
use mcpgate::{Config, Principal};
use mcpgate_seal::{AtRest, KeyRing, RecordBinding, Sealer};
use mcpgate_store::testing::RedisServer;
use mcpgate_store::{AnyStore, Expect, Vault as _, VaultKey, VaultKind};
use mcpgate_upstream::UpstreamConfig;

use crate::support::{ISS, Req, app_with, claims, hs, hs256_config};

const SEAL_KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// The access token Alice's connection holds (the upstream takes no other).
const TOKEN: &str = "alice-upstream-token";
const UPSTREAM: &str = "files";
const ISSUER: &str = "https://as.example";

/// A protected 2026-07-28 upstream: [`TOKEN`] or 401; one tool, `whoami`, answering with the
/// token it came with.
async fn protected(headers: HeaderMap, Json(body): Json<Value>) -> axum::response::Response {
    let id = body["id"].clone();
    if id.is_null() {
        return StatusCode::ACCEPTED.into_response();
    }
    let token = headers.get("authorization").and_then(|v| v.to_str().ok()).and_then(|v| v.strip_prefix("Bearer "));
    if token != Some(TOKEN) {
        return (StatusCode::UNAUTHORIZED, [("www-authenticate", r#"Bearer error="invalid_token""#)]).into_response();
    }
    let result = match body["method"].as_str().unwrap_or_default() {
        "server/discover" => json!({"resultType": "complete", "supportedVersions": ["2026-07-28"],
            "capabilities": {"tools": {}}, "serverInfo": {"name": "files", "version": "1"}, "ttlMs": 0,
            "cacheScope": "private"}),
        "tools/list" => json!({"resultType": "complete", "ttlMs": 30000, "cacheScope": "private",
            "tools": [{"name": "whoami", "description": "Who am I", "inputSchema": {"type": "object"}}]}),
        "tools/call" => json!({"resultType": "complete", "content": [{"type": "text", "text": TOKEN}]}),
        _ => {
            let error = json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}});
            return (StatusCode::NOT_FOUND, Json(error)).into_response();
        }
    };
    Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
}

/// The protected upstream's URL.
async fn upstream() -> String {
    let app = axum::Router::new().route("/mcp", axum::routing::post(protected));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("binds");
    let url = format!("http://{}/mcp", listener.local_addr().expect("an address"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// The connection reads a `redis-server` executes, from its `MONITOR` feed.
struct VaultReads {
    port: u16,
    lines: mpsc::UnboundedReceiver<String>,
    marks: u32,
}

impl VaultReads {
    async fn start(port: u16) -> Self {
        let mut monitor = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connects");
        monitor.write_all(b"MONITOR\r\n").await.expect("MONITOR");
        let mut reader = BufReader::new(monitor);
        let mut ok = String::new();
        reader.read_line(&mut ok).await.expect("an answer");
        assert!(ok.starts_with("+OK"), "MONITOR: {ok}");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut line = String::new();
            while reader.read_line(&mut line).await.is_ok_and(|n| n > 0) {
                if tx.send(std::mem::take(&mut line)).is_err() {
                    return;
                }
            }
        });
        Self { port, lines, marks: 0 }
    }

    /// The reads of a connection entry since the last count: everything Redis executed before
    /// a mark sent now (the requests counted have been answered, so all of theirs).
    async fn count(&mut self) -> usize {
        self.marks += 1;
        let mark = format!("vault-reads-mark-{}", self.marks);
        let mut conn = tokio::net::TcpStream::connect(("127.0.0.1", self.port)).await.expect("connects");
        let echo = format!("*2\r\n$4\r\nECHO\r\n${}\r\n{mark}\r\n", mark.len());
        conn.write_all(echo.as_bytes()).await.expect("ECHO");
        let _ = conn.read(&mut [0u8; 64]).await.expect("the echo");
        let mut reads = 0;
        let wait = std::time::Duration::from_secs(10);
        loop {
            let line = tokio::time::timeout(wait, self.lines.recv()).await.expect("the mark").expect("the feed");
            if line.contains(&mark) {
                return reads;
            }
            if line.contains("\"HMGET\"") && line.contains(":vault}:conn:") {
                reads += 1;
            }
        }
    }
}

fn config(server: &RedisServer, upstream_url: &str, audit: Option<&std::path::Path>) -> Config {
    let mut c = hs256_config();
    c.redis_url = Some(server.url());
    c.seal.keys = vec![Secret::new(SEAL_KEY)];
    c.store.prefix = "vault-reads".to_owned();
    let mut files = UpstreamConfig::http(UPSTREAM, upstream_url);
    files.auth = mcpgate_upstream::config::UpstreamAuth::Oauth;
    c.upstream = vec![files];
    c.federation.startup_wait_secs = 1;
    c.server.public_url = Some("http://127.0.0.1:8080".to_owned());
    c.auth.browser_login.verify_user = false;
    if let Some(path) = audit {
        c.audit = AuditConfig {
            enabled: true,
            sink: AuditSink::File,
            path: Some(path.to_string_lossy().into_owned()),
            include_arguments: false,
        };
    }
    c
}

/// Alice's connection to [`UPSTREAM`] written into the vault as the gateway seals it: a token
/// that lives an hour (no refresh is due).
async fn connect_alice(store: &AnyStore) {
    let key = Principal::new(ISS, "alice", Vec::new()).key().to_owned();
    let now =
        u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis())
            .expect("ms");
    let connection = json!({"access_token": TOKEN, "refresh_token": "alice-refresh", "expires_at_ms": now + 3_600_000,
        "issued_at_ms": now, "scope": null, "issuer": ISSUER, "resource": "https://files.example/mcp",
        "token_endpoint": "https://as.example/token", "client_id": "mcpgate", "client_secret": null,
        "client_auth": "none"});
    let meta = json!({"issuer": ISSUER, "scope": null, "expires_at": now + 3_600_000, "connected_at": now});
    let sealer = Sealer::new(KeyRing::parse(&[SEAL_KEY]).expect("a ring"), 16 * 1024);
    let binding = RecordBinding::new("oauth-connection", &[&key, UPSTREAM, ISSUER]);
    let sealed = AtRest::new(&sealer, true)
        .seal_always("oauth-connection", &binding, "tokens", &connection.to_string())
        .expect("sealed");
    let entry = VaultKey::new(VaultKind::Connection, &key, UPSTREAM);
    store.vault_put(&entry, &sealed, &meta.to_string(), Expect::Absent).await.expect("written");
}

/// Vault reads of Alice's first `tools/list` (her list there read anew), a second one (kept),
/// and of each of three calls of her own tool.
async fn reads(audit: Option<&std::path::Path>) -> (usize, usize, Vec<usize>) {
    let server = RedisServer::start();
    let url = upstream().await;
    let (app, state) = app_with(config(&server, &url, audit), |_| {}).await;
    connect_alice(state.store()).await;
    let mut vault = VaultReads::start(server.port()).await;
    let alice = format!("Bearer {}", hs(&claims("alice")));
    let list = || Req::modern("tools/list", json!({})).header("authorization", &alice);
    let call =
        || Req::modern("tools/call", json!({"name": "files_whoami", "arguments": {}})).header("authorization", &alice);

    vault.count().await;
    let listed = list().send(&app).await.result();
    let names: Vec<&str> =
        listed["tools"].as_array().expect("tools").iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"files_whoami") && !names.contains(&"files_connect"), "{listed}");
    let first_list = vault.count().await;
    list().send(&app).await.result();
    let kept_list = vault.count().await;
    let mut calls = Vec::new();
    for _ in 0..3 {
        let result = call().send(&app).await.result();
        assert_eq!(result["content"][0]["text"], TOKEN, "{result}");
        calls.push(vault.count().await);
    }
    (first_list, kept_list, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_federated_oauth_call_reads_the_callers_connection_once_and_a_list_once_per_upstream() {
    let (first_list, kept_list, calls) = reads(None).await;
    assert_eq!((first_list, kept_list), (1, 1), "vault reads per tools/list (read anew, kept)");
    assert_eq!(calls, [1, 1, 1], "vault reads per tools/call");

    let dir = tempfile::tempdir().expect("a directory");
    let (first_list, kept_list, calls) = reads(Some(&dir.path().join("audit.jsonl"))).await;
    assert_eq!((first_list, kept_list), (1, 1), "vault reads per tools/list with the audit trail on");
    assert_eq!(calls, [1, 1, 1], "vault reads per tools/call with the audit trail on");
}
