//! Criterion benchmarks of whole requests through the router, in process (no sockets): the
//! CPU one replica spends per request, parsing and validation included.
//!
//! - parse+validate a `tools/call`: the protocol decode and the params, alone;
//! - a sync `tools/call` (`echo`), 2026-07-28, end to end through the router;
//! - render a stored task: a completed `TaskRecord` to the extension's `DetailedTask` JSON;
//! - `tasks/get` of a finished task (memory store): lookup, render, serialize.
//!
//! Run: `cargo bench -p mcpgate --bench requests`.

use std::hint::black_box;
use std::time::Duration;

use tokio::time::Instant;

use axum::body::Body;
use axum::http::Request;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

use mcpgate::{AppState, Config};
use mcpgate_protocol::Era;
use mcpgate_protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION};
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{TaskId, TaskOutcome, TaskRecord};

const META: &str = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#;

fn request(method: &str, name: &str, params: &str) -> Request<Body> {
    let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{{params},{META}}}}}"#);
    Request::post("/mcp")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("host", "localhost")
        .header(MCP_PROTOCOL_VERSION, "2026-07-28")
        .header(MCP_METHOD, method)
        .header(MCP_NAME, name)
        .body(Body::from(body))
        .expect("request")
}

async fn send(app: &axum::Router, req: Request<Body>) -> Value {
    let resp = app.clone().oneshot(req).await.expect("infallible");
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("JSON")
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("runtime");
    let config = Config { toolset: vec!["demo".to_owned(), "conformance".to_owned()], ..Config::default() };
    let app = rt.block_on(async { mcpgate::app(AppState::new(config).await.expect("state")) });

    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":"hello"}},{META}}}}}"#
    );
    c.bench_function("parse+validate tools/call", |b| {
        b.iter(|| {
            let incoming = mcpgate_protocol::decode(black_box(body.as_bytes())).expect("decodes");
            let mcpgate_protocol::Incoming::Request(request) = incoming else { panic!("a request") };
            let params: mcpgate_protocol::tool::CallToolParams =
                mcpgate_protocol::jsonrpc::decode_params(request.params).expect("params");
            black_box(params)
        })
    });

    let record = completed_record();
    c.bench_function("render a completed task (DetailedTask JSON)", |b| {
        b.iter(|| {
            let view = mcpgate::internals::task_view::detailed(black_box(&record)).expect("renders");
            black_box(serde_json::to_vec(&view).expect("serializes"))
        })
    });

    c.bench_function("tools/call echo (router, in process)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let reply =
                        send(&app, request("tools/call", "echo", r#""name":"echo","arguments":{"text":"hi"}"#)).await;
                    black_box(reply);
                }
                start.elapsed()
            })
        })
    });

    let task = rt.block_on(async {
        let created =
            send(&app, request("tools/call", "slow_compute", r#""name":"slow_compute","arguments":{"seconds":0}"#))
                .await;
        let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
        // Let it finish.
        for _ in 0..200 {
            let got = send(&app, request("tasks/get", &id, &format!(r#""taskId":"{id}""#))).await;
            if got["result"]["status"] == "completed" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        id
    });
    c.bench_function("tasks/get completed task (router, memory store)", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    let reply = send(&app, request("tasks/get", &task, &format!(r#""taskId":"{task}""#))).await;
                    black_box(reply);
                }
                start.elapsed()
            })
        })
    });
}

/// A completed task as the store hands it back: a small tool result, like `echo`'s.
fn completed_record() -> TaskRecord {
    TaskRecord {
        id: TaskId::generate(7),
        owner: "anonymous".to_owned(),
        issuer: String::new(),
        subject: "anonymous".to_owned(),
        era: Era::Modern,
        tool: "slow_compute".to_owned(),
        arguments: r#"{"seconds":0}"#.to_owned(),
        capabilities: "{}".to_owned(),
        scopes: Vec::new(),
        status: TaskStatus::Completed,
        status_message: None,
        progress_ppm: None,
        created_ms: 1_795_000_000_000,
        updated_ms: 1_795_000_000_250,
        ttl_ms: Some(3_600_000),
        poll_interval_ms: 500,
        outcome: Some(TaskOutcome::Result(
            r#"{"content":[{"type":"text","text":"done after 0 s"}],"isError":false}"#.to_owned(),
        )),
        tool_error: false,
        attempts: 1,
        resumable: false,
        input_requests: Default::default(),
        state: None,
        input_responses: Default::default(),
        credential: None,
        trace: None,
        server: None,
    }
}

criterion_group!(requests, benches);
criterion_main!(requests);
