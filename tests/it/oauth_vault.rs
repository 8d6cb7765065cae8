//! The vault's records against a running fleet, with what `oauth_connect.rs` sets up (two
//! replicas sharing a real Redis, `oidc-provider` as the gateway's issuer and the upstream's
//! authorization server, the FastMCP server that names the bearer of its token):
//!
//! - a connection planted in plain JSON under a user's key (what someone with write access
//!   to Redis and no key can write: a token of their own account there, then an expiring one
//!   whose refresh token names their own token endpoint) is never used: the user's list shows
//!   only the connect stand-in, their call asks them to connect, the planted refresh token is
//!   never POSTed, and the refusal is counted;
//! - a registration planted in plain is never offered to the authorization server: the
//!   gateway registers again and the user connects with its own client;
//! - disconnecting (the user's `DELETE`, an operator's `credentials revoke`) revokes the
//!   tokens at the authorization server (RFC 7009): the refresh token is refused there after,
//!   while another user's, not disconnected, is not.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use mcpgate_e2e::{Client, UserAgent, run_to_end};
use mcpgate_seal::{AtRest, AtRestFormat, RecordBinding};
use mcpgate_store::{Expect, Vault as _, VaultEntry, VaultKey, VaultKind};

use crate::oauth_connect::{ADMIN_TOKEN, Setup, bearer, connect, principal_key, sealer};

const UPSTREAM: &str = "files";

/// `sub`'s connection record as stored (opened with the cluster's key) and its entry.
async fn record(setup: &Setup, sub: &str) -> anyhow::Result<(Value, VaultEntry)> {
    let key = principal_key(setup.servers.issuer(), sub);
    let entry = setup
        .vault()
        .await?
        .vault_get(&VaultKey::new(VaultKind::Connection, &key, UPSTREAM))
        .await?
        .ok_or_else(|| anyhow::anyhow!("{sub} has no connection"))?;
    let binding = RecordBinding::new("oauth-connection", &[&key, UPSTREAM, setup.servers.issuer()]);
    let plain = AtRest::new(&sealer()?, true).open("oauth-connection", &binding, "tokens", entry.value.clone())?;
    Ok((serde_json::from_str(&plain)?, entry))
}

/// Writes `value` as it is (no key) under `sub`'s connection key, with `meta`.
async fn plant(setup: &Setup, sub: &str, value: &Value, meta: &str) -> anyhow::Result<()> {
    let key = VaultKey::new(VaultKind::Connection, &principal_key(setup.servers.issuer(), sub), UPSTREAM);
    setup.vault().await?.vault_put(&key, &value.to_string(), meta, Expect::Any).await?;
    Ok(())
}

/// A 2026-07-28 request of `sub` to replica `i`: its JSON-RPC answer.
async fn request(setup: &Setup, sub: &str, i: usize, method: &str, params: Value) -> anyhow::Result<Value> {
    let auth = bearer(setup, sub)?;
    let url = setup.cluster.replica_url(i);
    let reply = Client::new()?.modern_with(&url, &[("authorization", &auth)], method, params).await?;
    reply.message(&1.into()).ok_or_else(|| anyhow::anyhow!("no answer: {}", reply.body))
}

/// The tools `sub` sees through replica `i`.
async fn tool_names(setup: &Setup, sub: &str, i: usize) -> anyhow::Result<Vec<String>> {
    let answer = request(setup, sub, i, "tools/list", json!({})).await?;
    let tools = answer["result"]["tools"].as_array().ok_or_else(|| anyhow::anyhow!("no tools: {answer}"))?;
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

/// The sum over both replicas of the metric series `series` (its full name and labels).
async fn metric(setup: &Setup, series: &str) -> anyhow::Result<u64> {
    let mut total = 0;
    for i in [0, 1] {
        let url = format!("{}/metrics", setup.cluster.replica_url(i).trim_end_matches("/mcp"));
        let text = reqwest::get(&url).await?.text().await?;
        total += text
            .lines()
            .find_map(|line| line.strip_prefix(series)?.trim().parse::<u64>().ok())
            .ok_or_else(|| anyhow::anyhow!("{series} missing on replica {i}"))?;
    }
    Ok(total)
}

/// A token endpoint nothing may reach: it keeps every request it gets and refuses it.
struct Trap {
    url: String,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Trap {
    async fn start() -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}/token", listener.local_addr()?);
        let seen = Arc::new(Mutex::new(Vec::new()));
        let kept = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buf = vec![0u8; 16 * 1024];
                let n =
                    tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf)).await.ok().and_then(Result::ok);
                kept.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(String::from_utf8_lossy(&buf[..n.unwrap_or(0)]).into_owned());
                let body = r#"{"error":"invalid_grant"}"#;
                let answer = format!(
                    "HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                     connection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
            }
        });
        Ok(Self { url, seen })
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }
}

fn now_ms() -> u64 {
    u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()))
        .unwrap_or(u64::MAX)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_record_planted_in_the_vault_is_never_used() -> anyhow::Result<()> {
    let setup = Setup::start().await?;
    let logs = || format!("{}\n{}", setup.cluster.replica(0).logs(), setup.cluster.replica(1).logs());

    // Mallory connects his own account, as anyone may: the gateway registers its client.
    let (status, page, _, _) =
        connect(&setup, &mut UserAgent::new()?, &setup.link("mallory")?, "mallory", (0, 1)).await?;
    assert_eq!(status, StatusCode::OK, "{page}\n{}", logs());
    let (mallorys, entry) = record(&setup, "mallory").await?;

    // With write access to Redis and no key, he copies his tokens, in plain JSON, under
    // Alice's key. Alice's list does not show the upstream's tools through his account.
    plant(&setup, "alice", &mallorys, &entry.meta).await?;
    let names = tool_names(&setup, "alice", 0).await?;
    assert!(!names.iter().any(|n| n == "files_whoami"), "Alice sees tools through Mallory's account: {names:?}");
    assert!(names.iter().any(|n| n == "files_connect"), "Alice is offered to connect: {names:?}");

    // Planted again, expiring, its refresh token for Mallory's own token endpoint: Alice's
    // call asks her to connect, and nothing is POSTed there.
    let trap = Trap::start().await?;
    let mut expiring = mallorys.clone();
    expiring["expires_at_ms"] = json!(now_ms() - 1_000);
    expiring["issued_at_ms"] = json!(now_ms() - 600_000);
    expiring["refresh_token"] = json!("planted-refresh-token");
    expiring["token_endpoint"] = json!(trap.url);
    plant(&setup, "alice", &expiring, &entry.meta).await?;
    let answer = request(&setup, "alice", 1, "tools/call", json!({"name": "files_whoami", "arguments": {}})).await?;
    let said = answer.to_string();
    assert!(!said.contains("mallory"), "Alice's call ran on Mallory's account: {said}");
    assert!(said.contains("/oauth/connect/"), "Alice is asked to connect: {said}");
    assert_eq!(trap.seen(), Vec::<String>::new(), "the planted refresh token was POSTed");
    let refused =
        r#"mcpgate_oauth_vault_records_refused_total{upstream="files",record="connection",reason="not_sealed"}"#;
    assert!(metric(&setup, refused).await? >= 2, "the refusals are counted");

    // A registration planted in plain is not offered to the authorization server: the
    // gateway registers again, and Bob connects with the gateway's own client.
    let registration = VaultKey::new(VaultKind::Registration, UPSTREAM, setup.servers.issuer());
    let store = setup.vault().await?;
    let sealed = store.vault_get(&registration).await?.ok_or_else(|| anyhow::anyhow!("no registration"))?;
    let planted = json!({"client_id": "planted-client", "client_secret": null, "auth": "none"}).to_string();
    store.vault_put(&registration, &planted, &sealed.meta, Expect::Version(sealed.version)).await?;
    let (status, page, _, _) = connect(&setup, &mut UserAgent::new()?, &setup.link("bob")?, "bob", (1, 0)).await?;
    assert_eq!(status, StatusCode::OK, "{page}\n{}", logs());
    let (bobs, _) = record(&setup, "bob").await?;
    assert_ne!(bobs["client_id"], "planted-client", "Bob's tokens were issued to the planted client");
    let now = store.vault_get(&registration).await?.ok_or_else(|| anyhow::anyhow!("no registration"))?;
    assert_eq!(AtRest::format(&now.value), AtRestFormat::Current, "registered again, sealed");
    Ok(())
}

/// Spends `record`'s refresh token at the authorization server as its client: the status.
async fn refresh_at_the_server(record: &Value) -> anyhow::Result<(u16, String)> {
    let form = [
        ("grant_type", "refresh_token"),
        ("refresh_token", record["refresh_token"].as_str().unwrap_or_default()),
        ("client_id", record["client_id"].as_str().unwrap_or_default()),
        ("resource", record["resource"].as_str().unwrap_or_default()),
    ];
    anyhow::ensure!(record["client_auth"] == "none", "a public client (else the test needs its secret): {}", {
        record["client_auth"].clone()
    });
    let endpoint = record["token_endpoint"].as_str().unwrap_or_default();
    // A form body, encoded as a query string is.
    let body = reqwest::Url::parse_with_params("http://form.invalid/", &form)?.query().unwrap_or_default().to_owned();
    let response = reqwest::Client::new()
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await?;
    Ok((response.status().as_u16(), response.text().await?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disconnecting_revokes_the_tokens_at_the_authorization_server() -> anyhow::Result<()> {
    let setup = Setup::start().await?;
    let logs = || format!("{}\n{}", setup.cluster.replica(0).logs(), setup.cluster.replica(1).logs());
    for (sub, at) in [("alice", (0, 1)), ("bob", (1, 0)), ("carol", (0, 1))] {
        let (status, page, _, _) = connect(&setup, &mut UserAgent::new()?, &setup.link(sub)?, sub, at).await?;
        assert_eq!(status, StatusCode::OK, "{sub}: {page}\n{}", logs());
    }
    let (alices, _) = record(&setup, "alice").await?;
    let (bobs, _) = record(&setup, "bob").await?;
    let (carols, _) = record(&setup, "carol").await?;

    // Alice disconnects with her own bearer: her refresh token is dead at the server.
    let url = format!("{}/oauth/connections/{UPSTREAM}", setup.cluster.replica_url(1).trim_end_matches("/mcp"));
    let status = reqwest::Client::new().delete(&url).header("authorization", bearer(&setup, "alice")?).send().await?;
    assert_eq!(status.status(), StatusCode::NO_CONTENT);
    let (status, body) = refresh_at_the_server(&alices).await?;
    assert_eq!(status, 400, "Alice's refresh token still works after she disconnected: {body}\n{}", logs());
    assert!(body.contains("invalid_grant"), "{body}");

    // An operator revokes Carol's connection: the same.
    let admin = format!("http://{}", setup.cluster.replica(0).admin_addr().expect("an admin listener"));
    let carol = principal_key(setup.servers.issuer(), "carol");
    let args = ["admin", "--url", &admin, "credentials", "revoke", &carol, UPSTREAM];
    let (exit, out, err) = run_to_end(&args, &[("MCPGATE_ADMIN_TOKEN", ADMIN_TOKEN)])?;
    assert!(exit.success(), "{err}");
    assert_eq!(serde_json::from_str::<Value>(&out)?["revoked"], true, "{out}");
    let (status, body) = refresh_at_the_server(&carols).await?;
    assert_eq!(status, 400, "Carol's refresh token still works after the operator revoked it: {body}");

    // Control: Bob's, never disconnected, is alive (the check above can tell).
    let (status, body) = refresh_at_the_server(&bobs).await?;
    assert_eq!(status, 200, "Bob's refresh token: {body}");
    let revoked = r#"mcpgate_oauth_revocations_total{upstream="files",outcome="revoked"}"#;
    assert_eq!(metric(&setup, revoked).await?, 2, "both revocations counted");
    Ok(())
}
