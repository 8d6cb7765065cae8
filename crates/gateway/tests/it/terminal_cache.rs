//! `tasks/get` answered from a replica's cache of finished task records, against a real
//! `redis-server`: a cached record is checked exactly as one read from Redis (its owner, and
//! the virtual server it was created through), so another principal, or the owner through
//! another server, gets "not found" from the cache too.

use std::time::Duration;

use serde_json::{Value, json};

use mcpgate::Config;
use mcpgate::config::{Secret, VirtualServer};
use mcpgate_store::AnyStore;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_for};

use crate::support::{Req, app_with, assert_error, claims, hs, hs256_config};

const OPS: &str = "/servers/ops/mcp";
const DOCS: &str = "/docs/mcp";

fn redis_config(server: &RedisServer) -> Config {
    let mut c = hs256_config();
    c.redis_url = Some(server.url());
    c.seal.keys = vec![Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
    c.store.prefix = "cache".to_owned();
    let mut ops = VirtualServer::new("ops");
    ops.tools = vec!["slow_*".to_owned()];
    let mut docs = VirtualServer::new("docs");
    docs.path = Some(DOCS.to_owned());
    docs.tools = vec!["slow_compute".to_owned()];
    c.servers = vec![ops, docs];
    c
}

fn ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cached_finished_task_is_still_found_only_by_its_owner_through_its_server() {
    let server = RedisServer::start();
    let (app, state) = app_with(redis_config(&server), |_| {}).await;
    let AnyStore::Redis(store) = state.store() else { panic!("a Redis store") };
    let hits = || store.terminal_cache().hits;
    let (alice, bob) = (format!("Bearer {}", hs(&claims("alice"))), format!("Bearer {}", hs(&claims("bob"))));
    let get = |id: &str, path: &str, token: &str| {
        Req::modern_with("tasks/get", json!({"taskId": id}), ext()).at(path).header("authorization", token)
    };

    let call = json!({"name": "slow_compute", "arguments": {"seconds": 0}});
    let created = Req::modern_with("tools/call", call, ext()).at(OPS).header("authorization", &alice).send(&app).await;
    // Answered with the task, or with its result when it ended within tasks.answer_within_ms
    // (the task's id then in `_meta`): either way a finished task to read back.
    let answer = created.result();
    let id = answer["taskId"].as_str().or_else(|| answer["_meta"]["io.mcpgate/taskId"].as_str());
    let id = id.unwrap_or_else(|| panic!("a task: {created:?}")).to_owned();
    wait_for(format_args!("task {id} to complete"), Duration::from_secs(20), async || {
        let task = get(&id, OPS, &alice).send(&app).await.result();
        if task["status"] == "completed" { Look::Done(()) } else { Look::NotYet(task.to_string()) }
    })
    .await;

    // Kept: the owner's next read is answered from the cache, with the result inline.
    let before = hits();
    let task = get(&id, OPS, &alice).send(&app).await.result();
    assert_eq!(task["result"]["content"][0]["text"], "Computed result in 0 s", "{task}");
    assert_eq!(hits(), before + 1, "answered from the cache");

    // Another principal, through the same server: not found, from the cached record.
    assert_error(&get(&id, OPS, &bob).send(&app).await, 200, -32602);
    assert_eq!(hits(), before + 2, "bob's read found the cached record and was refused it");
    // The owner through another server: not found either; through the root: found.
    assert_error(&get(&id, DOCS, &alice).send(&app).await, 200, -32602);
    assert_eq!(hits(), before + 3, "the read through docs found the cached record and was refused it");
    assert_eq!(get(&id, "/mcp", &alice).send(&app).await.result()["status"], "completed");
}
