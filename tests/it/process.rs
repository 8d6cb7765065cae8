//! One or two real replicas: start-up, the bound-address line, graceful shutdown, sealed
//! legacy sessions across replicas, start-up errors, `--help`, and the README quick start.

use std::time::Duration;

use serde_json::{Value, json};

use anyhow::Context as _;
use mcpgate_e2e::{Client, Gateway, PATIENCE, run_to_end, wait_for};

const KEYS: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const OTHER_KEYS: &str = "k9:HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=";

#[tokio::test]
async fn prints_its_bound_address_and_serves() -> anyhow::Result<()> {
    let gw = Gateway::builder().start()?;
    assert!(gw.addr().starts_with("127.0.0.1:") && !gw.addr().ends_with(":0"), "{}", gw.addr());
    let client = Client::new()?;
    let (status, body) = client.get(&format!("http://{}/healthz", gw.addr())).await?;
    assert_eq!((status, body.trim()), (200, "ok"));
    let reply = client.modern(&gw.url(), "tools/call", json!({"name": "echo", "arguments": {"text": "e2e"}})).await?;
    assert_eq!(reply.json()?["result"]["content"][0]["text"], "e2e");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_in_flight_work_finish_then_exits_cleanly() -> anyhow::Result<()> {
    let mut gw = Gateway::builder().start()?;
    let client = Client::new()?;
    let params =
        json!({"name": "slow_report", "arguments": {"topic": "drain", "seconds": 2}, "_meta": {"progressToken": "t"}});
    let mut call = client.modern_stream(&gw.url(), "tools/call", params).await?;
    // SIGTERM once the call runs: its first progress report says so.
    let first = call.next(PATIENCE).await?.context("the call ended before any progress")?;
    assert_eq!(first["method"], "notifications/progress", "{first}");
    gw.terminate()?;
    let last = call.next_result(PATIENCE).await.map_err(|e| anyhow::anyhow!("{e:#}\n{}", gw.logs()))?;
    assert_eq!(last["result"]["content"][0]["text"], "Report on drain: 2 sections compiled.", "{last}");
    let status = tokio::task::block_in_place(|| gw.wait(Duration::from_secs(15)))?;
    assert!(status.success(), "exit status {status}\n{}", gw.logs());
    assert!(gw.logs().contains("SIGTERM received"), "{}", gw.logs());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_right_after_the_address_is_announced_is_a_clean_stop() -> anyhow::Result<()> {
    // Scripts and supervisors may stop a replica the moment it says where it listens: its
    // handler is in place before that line, so the stop is graceful (exit 0), never the
    // signal's default action. Several times, as the window it closes is short.
    for _ in 0..8 {
        let mut gw = Gateway::builder().start()?;
        gw.terminate()?;
        let status = tokio::task::block_in_place(|| gw.wait(Duration::from_secs(30)))?;
        anyhow::ensure!(status.success(), "exit status {status}\n{}", gw.logs());
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_session_works_on_every_replica_sharing_the_keys() -> anyhow::Result<()> {
    let a = Gateway::builder().env("MCPGATE_SEAL_KEYS", KEYS).start()?;
    let b = Gateway::builder().env("MCPGATE_SEAL_KEYS", KEYS).start()?;
    let stranger = Gateway::builder().env("MCPGATE_SEAL_KEYS", OTHER_KEYS).start()?;
    let client = Client::new()?;
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let reply = client.legacy(&a.url(), "initialize", init, None).await?;
    assert_eq!(reply.status, 200, "{}", reply.body);
    let session = reply.session.clone().expect("a sealed session id");
    let initialized = client
        .post(
            &b.url(),
            &[("mcp-session-id", &session)],
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
        )
        .await?;
    assert_eq!(initialized.status, 202);
    let tools = client.legacy(&b.url(), "tools/list", json!({}), Some(&session)).await?.json()?;
    assert!(tools["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{tools}");
    let call = client
        .legacy(&a.url(), "tools/call", json!({"name": "echo", "arguments": {"text": "x"}}), Some(&session))
        .await?;
    assert_eq!(call.json()?["result"]["content"][0]["text"], "x");
    let refused = client.legacy(&stranger.url(), "tools/list", json!({}), Some(&session)).await?;
    assert_eq!(refused.status, 404, "{}", refused.body);
    Ok(())
}

/// A replica whose seal keys cannot open what the running replicas seal is refused at
/// start-up, saying which key and how to fix it; a rotation done as docs/operations.md says
/// (new key second everywhere, then first, then the old one removed) starts at every step.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_with_other_seal_keys_is_refused_and_a_rotation_is_not() -> anyhow::Result<()> {
    const NEW_KEY: &str = "k2:ICEiIyQlJicoKSorLC0uLzAxMjM0NTY3ODk6Ozw9Pj8=";
    const SAME_ID_OTHER_KEY: &str = "k1:HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=";
    let redis = mcpgate_store::testing::RedisServer::start();
    let url = redis.url();
    let replica = |keys: &str| Gateway::builder().env("MCPGATE_SEAL_KEYS", keys).env("MCPGATE_REDIS_URL", &url).start();
    let refused = |keys: &str| -> anyhow::Result<String> {
        let env = [("MCPGATE_LISTEN", "127.0.0.1:0"), ("MCPGATE_SEAL_KEYS", keys), ("MCPGATE_REDIS_URL", &url)];
        let (status, _, stderr) = run_to_end(&[], &env)?;
        anyhow::ensure!(!status.success(), "{keys} must be refused: {stderr}");
        anyhow::ensure!(stderr.contains("seal.keys") && stderr.contains("cannot open"), "{stderr}");
        Ok(stderr)
    };
    let mut a = replica(KEYS)?;
    let stderr = refused(OTHER_KEYS)?;
    anyhow::ensure!(stderr.contains("seals with key \"k1\", which this replica's seal.keys lacks"), "{stderr}");
    let stderr = refused(SAME_ID_OTHER_KEY)?;
    anyhow::ensure!(stderr.contains("key id \"k1\" with a different key"), "{stderr}");

    // A new key first with the old one still in the ring starts (it opens all the fleet
    // seals), warning that the others cannot open what it seals until they hold the new key.
    let mut early = replica(&format!("{NEW_KEY},{KEYS}"))?;
    let warned = early.logs().contains("seals with key \"k2\", which no other running replica holds");
    anyhow::ensure!(warned, "{}", early.logs());
    stop(&mut early).await?;

    // The rotation: learn the new key everywhere, seal with it everywhere, drop the old one.
    let mut b = replica(&format!("{KEYS},{NEW_KEY}"))?;
    stop(&mut a).await?;
    let a = replica(&format!("{NEW_KEY},{KEYS}"))?;
    stop(&mut b).await?;
    let b = replica(NEW_KEY)?;
    for gw in [&a, &b] {
        anyhow::ensure!(!gw.logs().contains("no other running replica holds"), "{}", gw.logs());
    }
    // They share sessions, and a replica left with the old key alone is refused now.
    let init =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}});
    let client = Client::new()?;
    let session = client.legacy(&b.url(), "initialize", init, None).await?.session.context("a session id")?;
    let tools = client.legacy(&a.url(), "tools/list", json!({}), Some(&session)).await?;
    anyhow::ensure!(tools.status == 200, "{}", tools.body);
    let stderr = refused(KEYS)?;
    anyhow::ensure!(stderr.contains("seals with key \"k2\""), "{stderr}");
    Ok(())
}

/// SIGTERM once the replica serves, and the exit awaited.
async fn stop(gw: &mut Gateway) -> anyhow::Result<()> {
    let (client, ready) = (Client::new()?, format!("http://{}/readyz", gw.addr()));
    wait_for("the replica to serve", PATIENCE, async || {
        Ok(matches!(client.get(&ready).await, Ok((200, _))).then_some(()))
    })
    .await;
    gw.terminate()?;
    let status = tokio::task::block_in_place(|| gw.wait(Duration::from_secs(30)))?;
    anyhow::ensure!(status.success(), "exit status {status}\n{}", gw.logs());
    Ok(())
}

#[test]
fn start_up_errors_name_the_setting_and_exit_non_zero() -> anyhow::Result<()> {
    let ephemeral = ("MCPGATE_LISTEN", "127.0.0.1:0");
    for (env, needle) in [
        (vec![ephemeral, ("MCPGATE_AUTH_MODE", "kerberos")], "auth"),
        (vec![("MCPGATE_LISTEN", "0.0.0.0:0")], "auth.mode"),
        (vec![ephemeral, ("MCPGATE_REDIS_URL", "redis://127.0.0.1:1")], "seal.keys"),
        (vec![ephemeral, ("MCPGATE_TOOLSET", "nope")], "toolset"),
    ] {
        let (status, _, stderr) = run_to_end(&[], &env)?;
        assert!(!status.success(), "{env:?} must fail");
        assert!(stderr.contains(needle), "{env:?}: {stderr}");
    }
    Ok(())
}

/// A port another process holds is a user's mistake: the message names the way to choose
/// another, and no backtrace is printed even when `RUST_BACKTRACE` asks for one (nor for a
/// configuration error).
#[test]
fn a_taken_port_names_the_listen_setting_without_a_backtrace() -> anyhow::Result<()> {
    let taken = std::net::TcpListener::bind("127.0.0.1:0")?;
    let at = taken.local_addr()?.to_string();
    let (status, _, stderr) = run_to_end(&[], &[("MCPGATE_LISTEN", &at), ("RUST_BACKTRACE", "1")])?;
    assert!(!status.success(), "{stderr}");
    for needle in [at.as_str(), "port is taken", "--listen", "MCPGATE_LISTEN"] {
        assert!(stderr.contains(needle), "{needle:?} missing: {stderr}");
    }
    let (status, _, config_error) =
        run_to_end(&[], &[("MCPGATE_LISTEN", "127.0.0.1:0"), ("MCPGATE_TOOLSET", "nope"), ("RUST_BACKTRACE", "full")])?;
    assert!(!status.success(), "{config_error}");
    for printed in [&stderr, &config_error] {
        assert!(!printed.to_lowercase().contains("backtrace"), "a backtrace was printed: {printed}");
        assert!(printed.lines().any(|l| l.starts_with("Error: ")), "{printed}");
    }
    drop(taken);
    Ok(())
}

#[test]
fn help_documents_every_setting() -> anyhow::Result<()> {
    let (status, stdout, _) = run_to_end(&["--help"], &[])?;
    assert!(status.success());
    for flag in ["--listen", "--config", "--redis-url", "--toolset", "--auth-mode", "--seal-keys"] {
        assert!(stdout.contains(flag), "{flag} missing from --help");
    }
    for var in [
        "MCPGATE_LISTEN",
        "MCPGATE_REDIS_URL",
        "MCPGATE_TOOLSET",
        "MCPGATE_AUTH_MODE",
        "MCPGATE_SEAL_KEYS",
        "MCPGATE_AUTH_JWT_JWKS_URL",
        "MCPGATE_HTTP_BODY_LIMIT_BYTES",
    ] {
        assert!(stdout.contains(var), "{var} missing from --help");
    }
    Ok(())
}

#[tokio::test]
async fn a_generated_seal_key_is_accepted() -> anyhow::Result<()> {
    let (status, stdout, _) = run_to_end(&["--generate-seal-key"], &[])?;
    assert!(status.success());
    let key = stdout.trim();
    let redis = mcpgate_store::testing::RedisServer::start();
    let gw = Gateway::builder().env("MCPGATE_SEAL_KEYS", key).env("MCPGATE_REDIS_URL", &redis.url()).start()?;
    let (status, _) = Client::new()?.get(&format!("http://{}/readyz", gw.addr())).await?;
    assert_eq!(status, 200);
    Ok(())
}

/// The README's quick-start `curl` is what users run first; run exactly its headers and body.
#[tokio::test]
async fn the_readme_quick_start_request_works() -> anyhow::Result<()> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))?;
    let block = readme
        .split("```")
        .find(|b| b.contains("curl ") && b.contains("tools/call"))
        .expect("a curl block in the README");
    let quoted: Vec<&str> = block.split('\'').collect();
    let mut headers = Vec::new();
    let mut body = None;
    for (i, part) in quoted.iter().enumerate().skip(1).step_by(2) {
        let flag = quoted[i - 1].trim_end();
        if flag.ends_with("-H") {
            let (k, v) = part.split_once(':').expect("header");
            headers.push((k.trim().to_owned(), v.trim().to_owned()));
        } else if flag.ends_with("-d") {
            body = Some((*part).to_owned());
        }
    }
    let body = body.expect("a -d body in the README curl");
    assert!(block.contains("127.0.0.1:8080/mcp"), "the README targets the default address");
    let gw = Gateway::builder().start()?;
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let reply = Client::new()?.post(&gw.url(), &headers, body).await?;
    let json: Value = reply.json()?;
    assert_eq!(reply.status, 200, "{json}");
    assert!(json["result"]["content"][0]["text"].is_string(), "{json}");
    Ok(())
}
