//! Task workers against a real `redis-server`: a worker that loses Redis stops its tool before
//! its lease can lapse (so no other replica can start the task while it still runs); a result
//! whose write meets a stalled Redis is written once Redis answers, not recomputed; and a task
//! runs with the scopes its creator had.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};
use tokio::sync::Notify;

use mcpgate::Config;
use mcpgate::catalog::{BoxFuture, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor};
use mcpgate::config::Secret;
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_every, wait_for};

use crate::support::{Req, app_with, claims, config, hs, hs256_config};

fn with_ext() -> Value {
    json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
}

/// Multi-replica settings against `server`: a 3 s lease, 500 ms command timeout.
fn redis_config(server: &RedisServer) -> Config {
    let mut c = config();
    c.redis_url = Some(server.url());
    c.seal.keys = vec![Secret::new("k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")];
    c.tasks.lease_ms = 3_000;
    c.store.command_timeout_ms = 500;
    c.store.prefix = "w".to_owned();
    c
}

fn wall_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    u64::try_from(now.as_millis()).expect("ms")
}

async fn create(app: &Router, tool: &str) -> String {
    let reply = Req::modern_with("tools/call", json!({"name": tool, "arguments": {}}), with_ext()).send(app).await;
    reply.result()["taskId"].as_str().unwrap_or_else(|| panic!("a task: {:?}", reply.result())).to_owned()
}

async fn status(app: &Router, id: &str) -> Value {
    Req::modern_with("tasks/get", json!({"taskId": id}), with_ext()).send(app).await.result()
}

/// Runs until stopped; notes when it started and when it was stopped (wall clock, ms).
struct Sentinel {
    descriptor: ToolDescriptor,
    started: Arc<AtomicU64>,
    stopped: Arc<AtomicU64>,
}

impl Tool for Sentinel {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            struct Stopped(Arc<AtomicU64>);
            impl Drop for Stopped {
                fn drop(&mut self) {
                    self.0.store(wall_ms(), Ordering::SeqCst);
                }
            }
            self.started.store(wall_ms(), Ordering::SeqCst);
            let _stopped = Stopped(self.stopped.clone());
            tokio::time::sleep(Duration::from_secs(120)).await;
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text("never")]))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_loses_redis_stops_its_tool_before_the_lease_ends() {
    // Durable, so the lease's last value survives the outage and can be read afterwards.
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let (started, stopped) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (s, t) = (started.clone(), stopped.clone());
    let (app, _state) = app_with(redis_config(&server), move |b| {
        b.tool(Sentinel {
            descriptor: ToolDescriptor::new("sentinel", "Runs until stopped.", json!({"type": "object"}))
                .task_policy(TaskPolicy::Required),
            started: s,
            stopped: t,
        });
    })
    .await;
    let id = create(&app, "sentinel").await;
    wait_for("the tool to start", Duration::from_secs(10), async || started.load(Ordering::SeqCst) > 0).await;
    // Wait (bounded) until two renewals have landed, then take Redis away: renewals fail from
    // now on.
    let mut lease = lease_until(&server, &id);
    for renewal in 1..=2 {
        let what = format!("renewal {renewal} of the lease (past {lease})");
        lease = wait_every(what, Duration::from_secs(20), Duration::from_millis(50), async || {
            let until = lease_until(&server, &id);
            if until > lease { Look::Done(until) } else { Look::not_yet(until) }
        })
        .await;
    }
    assert_eq!(stopped.load(Ordering::SeqCst), 0, "runs while its lease is renewed");
    let outage = wall_ms();
    server.stop();
    wait_for("the tool to be stopped", Duration::from_secs(10), async || stopped.load(Ordering::SeqCst) > 0).await;
    let stopped_at = stopped.load(Ordering::SeqCst);
    server.restart();
    // The lease as Redis last extended it (no renewal landed after the outage).
    let lease_until = lease_until(&server, &id);
    assert!(stopped_at > outage, "stopped because of the outage, not before it");
    assert!(
        stopped_at < lease_until,
        "the tool ran until {stopped_at}, past its lease ({lease_until}): another replica could have started it"
    );
}

/// The task's `lease_until` (wall-clock ms) as Redis holds it, read with redis-cli.
fn lease_until(server: &RedisServer, id: &str) -> u64 {
    let key = format!("w:{{w:{}}}:task:{id}", &id[1..3]);
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &server.port().to_string(), "HGET", &key, "lease_until"])
        .output()
        .expect("redis-cli runs (Debian package redis-tools)");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("a lease in the record")
}

/// Returns once released; counts its runs.
struct Gated {
    descriptor: ToolDescriptor,
    gate: Arc<Notify>,
    runs: Arc<AtomicU32>,
}

impl Tool for Gated {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _: ToolCall, _: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let run = self.runs.fetch_add(1, Ordering::SeqCst) + 1;
            self.gate.notified().await;
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!("computed once (run {run})"))]))
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_whose_write_fails_is_retried_and_kept() {
    let server = RedisServer::start();
    let (gate, runs) = (Arc::new(Notify::new()), Arc::new(AtomicU32::new(0)));
    let (g, r) = (gate.clone(), runs.clone());
    let (app, _state) = app_with(redis_config(&server), move |b| {
        b.tool(Gated {
            descriptor: ToolDescriptor::new("gated", "Returns when released.", json!({"type": "object"}))
                .task_policy(TaskPolicy::Required),
            gate: g,
            runs: r,
        });
    })
    .await;
    let id = create(&app, "gated").await;
    wait_for("the tool to start", Duration::from_secs(10), async || runs.load(Ordering::SeqCst) == 1).await;
    // Redis stalls just as the result is ready: the first writes time out.
    server.pause();
    gate.notify_one();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    server.resume();
    let done = wait_every(
        format_args!("task {id} to complete"),
        Duration::from_secs(10),
        Duration::from_millis(50),
        async || {
            let task = status(&app, &id).await;
            if task["status"] == "completed" { Look::Done(task) } else { Look::NotYet(task.to_string()) }
        },
    )
    .await;
    assert_eq!(done["result"]["content"][0]["text"], "computed once (run 1)", "{done}");
    // Past a whole lease: no second run was started.
    tokio::time::sleep(Duration::from_millis(3_500)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the tool ran again");
}

/// Says which scopes its caller has.
struct Scopes(ToolDescriptor);

impl Tool for Scopes {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.0
    }

    fn call<'a>(&'a self, _: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(cx.principal().scopes().join(" "))]))
        })
    }
}

#[tokio::test]
async fn a_task_runs_with_its_creators_scopes() {
    let mut config = hs256_config();
    // A task to read back: its run, not the answer to its call, shows the scopes.
    config.tasks.answer_within_ms = 0;
    let (app, _state) = app_with(config, |b| {
        b.tool(Scopes(
            ToolDescriptor::new("scopes", "Lists the caller's scopes.", json!({"type": "object"}))
                .task_policy(TaskPolicy::Optional),
        ));
    })
    .await;
    let mut claims = claims("scoped");
    claims["scope"] = json!("reports:read tasks:run");
    let bearer = format!("Bearer {}", hs(&claims));
    let call = |caps: Value| {
        let (app, bearer) = (app.clone(), bearer.clone());
        async move {
            Req::modern_with("tools/call", json!({"name": "scopes", "arguments": {}}), caps)
                .header("authorization", &bearer)
                .send(&app)
                .await
                .result()
        }
    };
    let sync = call(json!({})).await;
    assert_eq!(sync["content"][0]["text"], "reports:read tasks:run", "{sync}");
    let id = call(with_ext()).await["taskId"].as_str().expect("a task").to_owned();
    let task = wait_for(format_args!("task {id} to complete"), Duration::from_secs(10), async || {
        let task = Req::modern_with("tasks/get", json!({"taskId": id}), with_ext())
            .header("authorization", &bearer)
            .send(&app)
            .await
            .result();
        if task["status"] == "completed" { Look::Done(task) } else { Look::NotYet(task.to_string()) }
    })
    .await;
    assert_eq!(task["result"]["content"], sync["content"], "the same scopes as a task: {task}");
}
