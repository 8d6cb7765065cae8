//! OpenTelemetry span export from the default build: with `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! every replica sends its spans to the collector over OTLP/HTTP, and the spans of one task
//! (its creation, its run and a read on another replica) all carry the task's id; without the
//! variable nothing is sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use mcpgate_e2e::{Client, Cluster, next_request};

const EXT: &str = "io.modelcontextprotocol/tasks";

/// What the collector received: (path, body) of each request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A stand-in OTLP/HTTP collector: answers every POST with 200 and keeps the bodies.
async fn collector() -> anyhow::Result<(String, Received)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let received: Received = Arc::default();
    let store = received.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let store = store.clone();
            tokio::spawn(async move {
                let mut buffer = Vec::new();
                while let Some(request) = next_request(&mut socket, &mut buffer, Duration::from_secs(5)).await {
                    let path = request.path().to_owned();
                    store.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push((path, request.body));
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
                    if socket.write_all(ok).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    Ok((url, received))
}

/// Starts a one-second `slow_report` task on `url`; its id.
async fn start_report(client: &Client, url: &str, topic: &str) -> anyhow::Result<String> {
    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    let params = json!({"name": "slow_report", "arguments": {"topic": topic, "seconds": 1}, "_meta": caps});
    let created = client.modern(url, "tools/call", params).await?.json()?;
    created["result"]["taskId"]
        .as_str()
        .or_else(|| created["result"]["task"]["taskId"].as_str())
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("no task: {created}"))
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle.as_bytes())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_replica_exports_the_spans_of_a_task_with_its_id() -> anyhow::Result<()> {
    let (endpoint, received) = collector().await?;
    let cluster = Cluster::builder(2)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .replica_env(0, "OTEL_SERVICE_NAME", "gateway-zero")
        .replica_env(1, "OTEL_SERVICE_NAME", "gateway-one")
        .start()?;
    let client = Client::new()?;
    let caps = json!({"io.modelcontextprotocol/clientCapabilities": {"extensions": {EXT: {}}}});
    let id = start_report(&client, &cluster.replica_url(0), "spans").await?;
    // Read it on the other replica until it is done.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let got = client.modern(&cluster.replica_url(1), "tasks/get", json!({"taskId": id, "_meta": caps})).await?;
        if got.json()?["result"]["status"] == "completed" {
            break;
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "task not completed: {}", got.body);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Both replicas' spans, each naming the task, reach the collector.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (zero, one) = {
            let bodies = received.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            anyhow::ensure!(bodies.iter().all(|(path, _)| path == "/v1/traces"), "only traces are sent");
            let naming = |service: &str| bodies.iter().any(|(_, b)| contains(b, service) && contains(b, &id));
            (naming("gateway-zero"), naming("gateway-one"))
        };
        if zero && one {
            break;
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "spans naming task {id}: from the creating replica {zero}, from the reading one {one}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// A span as exported: ids, name, string attributes and links ((trace id, span id) pairs).
#[derive(Debug, Default)]
struct Span {
    trace: Vec<u8>,
    id: Vec<u8>,
    name: String,
    attributes: Vec<(String, String)>,
    links: Vec<(Vec<u8>, Vec<u8>)>,
}

/// The (field number, bytes) of the length-delimited fields of a protobuf message (others
/// skipped): enough to walk an OTLP `ExportTraceServiceRequest`.
fn fields(mut buf: &[u8]) -> Vec<(u64, &[u8])> {
    fn varint(buf: &mut &[u8]) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let (&byte, rest) = buf.split_first()?;
            *buf = rest;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    let mut out = Vec::new();
    while let Some(key) = varint(&mut buf) {
        let skip = match key & 7 {
            0 => varint(&mut buf).map(|_| 0),
            1 => Some(8),
            5 => Some(4),
            2 => varint(&mut buf).and_then(|n| usize::try_from(n).ok()).inspect(|&n| {
                if n <= buf.len() {
                    out.push((key >> 3, &buf[..n]));
                }
            }),
            _ => None,
        };
        match skip {
            Some(n) if n <= buf.len() => buf = &buf[n..],
            _ => break,
        }
    }
    out
}

/// Every span of an export request.
fn spans(body: &[u8]) -> Vec<Span> {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    let mut spans = Vec::new();
    for (_, resource_spans) in fields(body).into_iter().filter(|(f, _)| *f == 1) {
        for (_, scope_spans) in fields(resource_spans).into_iter().filter(|(f, _)| *f == 2) {
            for (_, raw) in fields(scope_spans).into_iter().filter(|(f, _)| *f == 2) {
                let mut span = Span::default();
                for (field, value) in fields(raw) {
                    match field {
                        1 => span.trace = value.to_vec(),
                        2 => span.id = value.to_vec(),
                        5 => span.name = text(value),
                        9 => {
                            let kv = fields(value);
                            let key = kv.iter().find(|(f, _)| *f == 1).map(|(_, v)| text(v)).unwrap_or_default();
                            let string = kv
                                .iter()
                                .find(|(f, _)| *f == 2)
                                .and_then(|(_, any)| fields(any).into_iter().find(|(f, _)| *f == 1))
                                .map(|(_, v)| text(v))
                                .unwrap_or_default();
                            span.attributes.push((key, string));
                        }
                        13 => {
                            let link = fields(value);
                            let get =
                                |n| link.iter().find(|(f, _)| *f == n).map(|(_, v)| v.to_vec()).unwrap_or_default();
                            span.links.push((get(1), get(2)));
                        }
                        _ => {}
                    }
                }
                spans.push(span);
            }
        }
    }
    spans
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_run_links_to_its_creation_and_settles_in_its_trace() -> anyhow::Result<()> {
    let (endpoint, received) = collector().await?;
    // Replica zero creates and runs nothing; the task goes through the queue to replica one.
    let cluster = Cluster::builder(2)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .replica_env(0, "MCPGATE_TASKS_MAX_RUNNING", "0")
        .start()?;
    let id = start_report(&Client::new()?, &cluster.replica_url(0), "links").await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let all: Vec<Span> = {
            let bodies = received.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            bodies.iter().flat_map(|(_, body)| spans(body)).collect()
        };
        let of_task = |name: &str| {
            all.iter().find(|s| s.name == name && s.attributes.iter().any(|(k, v)| k == "task" && *v == id))
        };
        if let (Some(create), Some(run), Some(settle)) = (of_task("mcp"), of_task("task"), of_task("settle")) {
            anyhow::ensure!(run.trace != create.trace, "a queued run is a trace of its own");
            anyhow::ensure!(
                run.links.contains(&(create.trace.clone(), create.id.clone())),
                "the run links to the creating request: {run:?} / {create:?}"
            );
            anyhow::ensure!(settle.trace == run.trace, "the settle span is in the run's trace");
            return Ok(());
        }
        anyhow::ensure!(tokio::time::Instant::now() < deadline, "spans of task {id} not all exported");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
