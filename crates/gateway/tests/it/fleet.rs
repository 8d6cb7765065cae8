//! `GET /admin/fleet` across replicas sharing one real Redis: every live replica's heartbeat
//! is listed on any of them, a replica with another configuration is flagged, a drained one
//! shows as draining, and a stopped one is gone.

use std::time::Duration;

use axum::Router;
use mcpgate_store::testing::wait::{Look, wait_for};
use serde_json::Value;

use crate::support::{Req, app_with, config};

const TOKEN: &str = "an-admin-token-of-at-least-32-characters";
const WAIT: Duration = Duration::from_secs(10);

fn replica_config(redis: &str, max_running: u64) -> mcpgate::config::Config {
    let mut c = config();
    c.redis_url = Some(redis.to_owned());
    c.seal.keys = vec![mcpgate::config::Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
    c.admin.listen = Some("127.0.0.1:0".parse().expect("addr"));
    c.admin.token = Some(mcpgate::config::Secret::new(TOKEN));
    c.tasks.max_running = max_running;
    c
}

async fn admin_call(admin: &Router, method: axum::http::Method, path: &str) -> Value {
    let resp = Req::get(path).method(method).header("authorization", &format!("Bearer {TOKEN}")).send(admin).await;
    assert_eq!(resp.status.as_u16(), 200, "{path}: {}", String::from_utf8_lossy(&resp.body));
    resp.json()
}

async fn fleet(admin: &Router) -> Value {
    admin_call(admin, axum::http::Method::GET, "/admin/fleet").await
}

fn entry<'a>(fleet: &'a Value, replica: &str) -> Option<&'a Value> {
    fleet["replicas"].as_array()?.iter().find(|r| r["replica"] == replica)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fleet_lists_live_replicas_flags_other_configs_and_forgets_stopped_ones() {
    let redis = mcpgate_store::testing::RedisServer::start();
    let (_, a) = app_with(replica_config(&redis.url(), 8), |_| {}).await;
    let (_, b) = app_with(replica_config(&redis.url(), 8), |_| {}).await;
    let (_, c) = app_with(replica_config(&redis.url(), 9), |_| {}).await;
    let c_stopping = c.stopping().clone();
    let (a, b, c) = (mcpgate::admin::router(a), mcpgate::admin::router(b), mcpgate::admin::router(c));
    let id = |v: Value| v["replica"].as_str().expect("this replica's id").to_owned();
    let (id_a, id_b, id_c) = (id(fleet(&a).await), id(fleet(&b).await), id(fleet(&c).await));

    // Every replica is listed on any of them.
    let seen = wait_for("all three replicas listed", WAIT, async || {
        let seen = fleet(&a).await;
        if [&id_a, &id_b, &id_c].iter().all(|r| entry(&seen, r).is_some()) {
            Look::Done(seen)
        } else {
            Look::not_yet(seen)
        }
    })
    .await;
    let (ea, eb, ec) = (entry(&seen, &id_a).unwrap(), entry(&seen, &id_b).unwrap(), entry(&seen, &id_c).unwrap());
    assert_eq!(ea["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(ea["configHash"].as_str().map(str::len), Some(64), "{ea}");
    assert_eq!(ea["configHash"], eb["configHash"], "the same settings hash the same");
    assert_ne!(ea["configHash"], ec["configHash"]);
    assert_eq!(seen["majorityConfigHash"], ea["configHash"]);
    assert_eq!(seen["configDiffers"], serde_json::json!([id_c]), "only the odd one out is flagged: {seen}");
    assert_eq!((ea["configDiffers"].as_bool(), ec["configDiffers"].as_bool()), (Some(false), Some(true)));
    assert_eq!((ea["this"].as_bool(), eb["this"].as_bool()), (Some(true), Some(false)));
    assert!(ea["startedMs"].as_u64().unwrap() > 0 && ea["writtenMs"].as_u64().unwrap() > 0, "{ea}");
    assert_eq!((eb["draining"].as_bool(), eb["tasksRunning"].as_u64()), (Some(false), Some(0)));
    let hash_a = ea["configHash"].as_str().unwrap();
    assert!(!hash_a.contains(TOKEN) && !seen.to_string().contains(TOKEN), "no secret is shown");

    // A drained replica shows as draining, on another replica.
    admin_call(&b, axum::http::Method::POST, "/admin/drain").await;
    wait_for("b draining, as seen from a", WAIT, async || {
        entry(&fleet(&a).await, &id_b).is_some_and(|e| e["draining"] == true)
    })
    .await;

    // A stopped replica is gone.
    c_stopping.cancel();
    let after = wait_for("c gone", WAIT, async || {
        let seen = fleet(&a).await;
        if entry(&seen, &id_c).is_none() { Look::Done(seen) } else { Look::not_yet(seen) }
    })
    .await;
    assert!(entry(&after, &id_a).is_some() && entry(&after, &id_b).is_some(), "{after}");
    assert_eq!(after["configDiffers"], serde_json::json!([]), "{after}");
}
