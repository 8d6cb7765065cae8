//! A stored task this replica cannot read, against a real `redis-server`: bytes planted in the
//! task's record (a plain result where a sealed one must be, a status no version wrote) are
//! refused with 500 and -32603 "a stored task cannot be read", the request's id echoed, in
//! either era; never served, never "not found".

use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};

use mcpgate::Config;
use mcpgate::config::Secret;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_every};

use crate::support::{Req, Resp, app, assert_error, config, initialize};

const PREFIX: &str = "u";

fn with_ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// Multi-replica settings against `server`: encryption at rest on (as by default), its
/// cutover at start-up (no window), so every task created here must hold sealed payloads.
fn redis_config(server: &RedisServer) -> Config {
    let mut c = config();
    c.redis_url = Some(server.url());
    c.seal.keys = vec![Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
    c.store.prefix = PREFIX.to_owned();
    c.store.encrypt_at_rest = true;
    c.store.at_rest_window_secs = 0;
    // What a read from Redis refuses is tested here: a finished record kept from before the
    // plant would be served instead (the true one).
    c.store.terminal_cache_entries = 0;
    // Every task is one to read back (none answered with its result at creation).
    c.tasks.answer_within_ms = 0;
    c
}

/// Sets `field` of task `id`'s record to `value`, behind the gateway's back.
fn plant(server: &RedisServer, id: &str, field: &str, value: &str) {
    let key = format!("{PREFIX}:{{{PREFIX}:{}}}:task:{id}", &id[1..3]);
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "HSET", &key, field, value])
        .output()
        .expect("redis-cli runs (Debian package redis-tools)");
    // 0: the field existed and was overwritten (the key is the task's record).
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "0", "{field} of {key} overwritten");
}

/// Polls `read` (bounded) until the task it reads is completed.
async fn until_completed(what: &str, read: impl AsyncFn() -> Value) {
    wait_every(format_args!("{what} to complete"), Duration::from_secs(20), Duration::from_millis(30), async || {
        let status = read().await;
        if status == "completed" { Look::Done(()) } else { Look::NotYet(status.to_string()) }
    })
    .await;
}

async fn modern_task(app: &Router) -> String {
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0}});
    let created = Req::modern_with("tools/call", call, with_ext()).send(app).await.result();
    let id = created["taskId"].as_str().expect("a task").to_owned();
    until_completed("the modern task", async || modern_get(app, &id).await.result()["status"].clone()).await;
    id
}

async fn modern_get(app: &Router, id: &str) -> Resp {
    Req::modern_with("tasks/get", json!({"taskId": id}), with_ext()).send(app).await
}

#[track_caller]
fn assert_unreadable(resp: &Resp) {
    let json = assert_error(resp, 500, -32603);
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("a stored task cannot be read"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_result_planted_in_a_sealed_task_is_500_in_both_eras() {
    let server = RedisServer::start();
    let app = app(redis_config(&server)).await;
    let plain = r#"{"content":[{"type":"text","text":"planted"}]}"#;

    // 2026-07-28: tasks/get inlines the result, so it reads it.
    let id = modern_task(&app).await;
    assert_eq!(modern_get(&app, &id).await.result()["status"], "completed", "readable before the plant");
    plant(&server, &id, "result", plain);
    assert_unreadable(&modern_get(&app, &id).await);

    // 2025-11-25: tasks/result answers with the result.
    let (session, _) = initialize(&app, "2025-11-25").await;
    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0}, "task": {}});
    let created = Req::legacy("tools/call", call, Some(&session)).send(&app).await.result();
    let id = created["task"]["taskId"].as_str().expect("a task").to_owned();
    let get = || Req::legacy("tasks/get", json!({"taskId": id}), Some(&session));
    until_completed("the legacy task", async || get().send(&app).await.result()["status"].clone()).await;
    plant(&server, &id, "result", plain);
    let result = Req::legacy("tasks/result", json!({"taskId": id}), Some(&session))
        .header("accept", "application/json")
        .send(&app)
        .await;
    assert_unreadable(&result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_no_version_wrote_is_500() {
    let server = RedisServer::start();
    let app = app(redis_config(&server)).await;
    let id = modern_task(&app).await;
    plant(&server, &id, "status", "half-done");
    assert_unreadable(&modern_get(&app, &id).await);
}
