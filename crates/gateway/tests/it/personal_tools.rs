//! Tools a caller has alone (as an `auth = "oauth"` upstream's are, through the catalog's
//! `ToolResolver`): their `tools/list` shows them in place of the stand-in, rendered
//! `cacheScope: "private"`; another caller sees the stand-in and cannot call them; a task of
//! such a tool is run by a worker that finds it for the task's creator.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use serde_json::{Value, json};

use mcpgate::Principal;
use mcpgate::catalog::{BoxFuture, FnTool, Outcome, PersonalTools, TaskPolicy, Tool, ToolDescriptor, ToolResolver};
use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_store::testing::wait::{Look, wait_every};

use crate::support::{Req, app_with, claims, hs, hs256_config};

const EXT: &str = "io.modelcontextprotocol/tasks";

/// Alice has a tool of her own, `own_echo`, in place of the stand-in `own_connect`.
struct AlicesTools;

fn own_echo() -> Arc<dyn Tool> {
    let descriptor =
        ToolDescriptor::new("own_echo", "Alice's own", json!({"type": "object"})).task_policy(TaskPolicy::Optional);
    Arc::new(FnTool::new(descriptor, |_, cx| {
        let text = format!("for {}", cx.principal().subject());
        Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(text)]))
    }))
}

impl ToolResolver for AlicesTools {
    fn resolve<'a>(&'a self, name: &'a str, principal: &'a Principal) -> BoxFuture<'a, Option<Arc<dyn Tool>>> {
        Box::pin(async move { (name == "own_echo" && principal.subject() == "alice").then(own_echo) })
    }

    fn personal<'a>(&'a self, principal: &'a Principal) -> BoxFuture<'a, PersonalTools> {
        Box::pin(async move {
            let mut personal = PersonalTools::default();
            if principal.subject() == "alice" {
                personal.replaced.push(("own_connect".to_owned(), vec![own_echo()]));
                personal.ttl_ms = Some(5_000);
            }
            personal
        })
    }
}

async fn gateway() -> Router {
    let mut config = hs256_config();
    // The task is one to read back (not answered with its result at creation).
    config.tasks.answer_within_ms = 0;
    let (app, _) = app_with(config, |b| {
        let stand_in = ToolDescriptor::new("own_connect", "Connect", json!({"type": "object"}));
        b.tool(FnTool::new(stand_in, |_, _| Outcome::Complete(CallToolResult::error("connect first"))));
        b.resolver(Arc::new(AlicesTools));
    })
    .await;
    app
}

fn as_user(req: Req, sub: &str) -> Req {
    req.header("authorization", &format!("Bearer {}", hs(&claims(sub))))
}

async fn list(app: &Router, sub: &str) -> (Vec<String>, Value) {
    let result = as_user(Req::modern("tools/list", json!({})), sub).send(app).await.result();
    let names = result["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().unwrap().to_owned());
    (names.collect(), result)
}

#[tokio::test]
async fn a_callers_own_tools_replace_the_stand_in_in_their_list_only() {
    let app = gateway().await;
    let (alices, result) = list(&app, "alice").await;
    assert!(alices.contains(&"own_echo".to_owned()) && !alices.contains(&"own_connect".to_owned()), "{alices:?}");
    assert_eq!(result["cacheScope"], "private");
    assert!(result["ttlMs"].as_u64().is_some_and(|t| t <= 5_000), "the shorter ttl holds: {result}");
    let (bobs, result) = list(&app, "bob").await;
    assert!(bobs.contains(&"own_connect".to_owned()) && !bobs.contains(&"own_echo".to_owned()), "{bobs:?}");
    assert_eq!(result["cacheScope"], "private", "lists differ per caller, so none is shared");
}

#[tokio::test]
async fn only_its_owner_calls_it_and_a_worker_runs_its_task_for_the_creator() {
    let app = gateway().await;
    let call = || Req::modern("tools/call", json!({"name": "own_echo", "arguments": {}}));
    let result = as_user(call(), "alice").send(&app).await.result();
    assert_eq!(result["content"][0]["text"], "for alice", "{result}");
    let resp = as_user(call(), "bob").send(&app).await;
    assert_eq!(resp.json()["error"]["code"], -32602, "unknown to bob: {}", resp.json());

    let create =
        Req::modern_with("tools/call", json!({"name": "own_echo", "arguments": {}}), json!({"extensions": {EXT: {}}}));
    let created = as_user(create, "alice").send(&app).await.result();
    let id = created["taskId"].as_str().or_else(|| created["task"]["taskId"].as_str()).expect("a task").to_owned();
    // Bounded: a worker of this replica claims and runs the task at once.
    let what = "the task's tool to be found for its creator (the task completed)";
    let task = wait_every(what, Duration::from_secs(10), Duration::from_millis(50), async || {
        let get = Req::modern_with("tasks/get", json!({"taskId": id}), json!({"extensions": {EXT: {}}}));
        let task = as_user(get, "alice").send(&app).await.result();
        if task["status"] == "completed" { Look::Done(task) } else { Look::NotYet(task.to_string()) }
    })
    .await;
    assert!(task.to_string().contains("for alice"), "run for its creator: {task}");
}
