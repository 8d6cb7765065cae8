//! OpenTelemetry span export from the default build: with `OTEL_EXPORTER_OTLP_ENDPOINT` set,
//! every replica sends its spans to the collector over OTLP/HTTP, and the spans of one task
//! (its creation, its run and a read on another replica) all carry the task's id; without the
//! variable nothing is sent, not even to the default endpoint (`localhost:4318`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::json;
use tokio::io::AsyncWriteExt as _;

use mcpgate_e2e::{Client, Cluster, Look, PATIENCE, TaskPoll, Until, next_request, settle, wait_for};

const EXT: &str = "io.modelcontextprotocol/tasks";

/// What the collector received: (path, body) of each request.
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// A stand-in OTLP/HTTP collector on an ephemeral port: its URL and what it receives.
async fn collector() -> anyhow::Result<(String, Received)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let received: Received = Arc::default();
    serve_collector(listener, received.clone());
    Ok((url, received))
}

/// Serves OTLP/HTTP on `listener`: answers every POST with 200 and keeps the bodies in `store`.
fn serve_collector(listener: tokio::net::TcpListener, store: Received) {
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
    let id = start_report(&client, &cluster.replica_url(0), "spans").await?;
    // Read it on the other replica until it is done.
    TaskPoll::new(&client, &cluster.replica_url(1)).until(&id, Until::Status("completed")).await;
    // Both replicas' spans, each naming the task, reach the collector.
    wait_for(format!("spans naming task {id} from both replicas"), PATIENCE, async || {
        let bodies = received.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        anyhow::ensure!(bodies.iter().all(|(path, _)| path == "/v1/traces"), "only traces are sent");
        let naming = |service: &str| bodies.iter().any(|(_, b)| contains(b, service) && contains(b, &id));
        let (zero, one) = (naming("gateway-zero"), naming("gateway-one"));
        Ok(if zero && one {
            Look::Done(())
        } else {
            Look::NotYet(format!("from the creating replica {zero}, from the reading one {one}"))
        })
    })
    .await;
    Ok(())
}

/// The port of OTLP/HTTP's default endpoint (`http://localhost:4318`): where an exporter left
/// at its defaults would send.
const DEFAULT_OTLP_PORT: u16 = 4318;

/// Requests that make spans on one replica: a call, and a one-second task followed to its end.
async fn make_spans(cluster: &Cluster, topic: &str) -> anyhow::Result<()> {
    let client = Client::new()?;
    let url = cluster.replica_url(0);
    let echo = client.modern(&url, "tools/call", json!({"name": "echo", "arguments": {"text": topic}})).await?;
    anyhow::ensure!(echo.status == 200, "{}", echo.body);
    let id = start_report(&client, &url, topic).await?;
    TaskPoll::new(&client, &url).until(&id, Until::Status("completed")).await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_variable_nothing_is_sent_even_to_the_default_endpoint() -> anyhow::Result<()> {
    // A collector on the default endpoint (both loopbacks `localhost` may name); another run of
    // this test may hold the port for a while.
    let listener = wait_for("the default OTLP port 4318 to be free", Duration::from_secs(120), async || {
        Ok(tokio::net::TcpListener::bind(("127.0.0.1", DEFAULT_OTLP_PORT)).await.ok())
    })
    .await;
    let received: Received = Arc::default();
    serve_collector(listener, received.clone());
    if let Ok(v6) = tokio::net::TcpListener::bind(("::1", DEFAULT_OTLP_PORT)).await {
        serve_collector(v6, received.clone());
    }
    let count = || received.lock().unwrap_or_else(std::sync::PoisonError::into_inner).len();

    // Without the variable (but with the others that tune export): nothing arrives while the
    // replica serves, over thirty of its export intervals.
    let quiet =
        Cluster::builder(1).env("OTEL_BSP_SCHEDULE_DELAY", "100").env("OTEL_SERVICE_NAME", "gateway-quiet").start()?;
    make_spans(&quiet, "quiet").await?;
    let sent = settle("requests at the collector", Duration::from_secs(3), PATIENCE, async || Ok(count())).await;
    assert_eq!(sent, 0, "spans were sent without OTEL_EXPORTER_OTLP_ENDPOINT");
    drop(quiet);

    // The same set-up with the variable naming the default endpoint: spans arrive, so the
    // collector would have seen any sent above.
    let loud = Cluster::builder(1)
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("OTEL_SERVICE_NAME", "gateway-loud")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &format!("http://localhost:{DEFAULT_OTLP_PORT}"))
        .start()?;
    make_spans(&loud, "loud").await?;
    wait_for("spans at the collector with the variable set", PATIENCE, async || {
        let sent = count();
        Ok(if sent > 0 { Look::Done(()) } else { Look::not_yet(sent) })
    })
    .await;
    Ok(())
}

/// A span as exported: ids, name, string attributes and links ((trace id, span id) pairs).
#[derive(Debug, Default)]
struct Span {
    trace: Vec<u8>,
    id: Vec<u8>,
    parent: Vec<u8>,
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
                        4 => span.parent = value.to_vec(),
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
    let all = wait_for(format!("the mcp, task and settle spans of task {id}"), PATIENCE, async || {
        let all: Vec<Span> = {
            let bodies = received.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            bodies.iter().flat_map(|(_, body)| spans(body)).collect()
        };
        let names: Vec<String> = all.iter().map(|s| s.name.clone()).collect();
        let found = ["mcp", "task"].iter().all(|name| of_task(&all, name, &id).is_some())
            && of_task(&all, "task", &id).is_some_and(|run| child(&all, "settle", run).is_some());
        Ok(if found { Look::Done(all) } else { Look::not_yet(names) })
    })
    .await;
    let (create, run) = (of_task(&all, "mcp", &id), of_task(&all, "task", &id));
    // The settle span is the run's child and does not repeat the task id its parent carries.
    let settle = run.and_then(|run| child(&all, "settle", run));
    let (Some(create), Some(run), Some(settle)) = (create, run, settle) else { unreachable!("found above") };
    anyhow::ensure!(run.trace != create.trace, "a queued run is a trace of its own");
    anyhow::ensure!(
        run.links.contains(&(create.trace.clone(), create.id.clone())),
        "the run links to the creating request: {run:?} / {create:?}"
    );
    anyhow::ensure!(settle.trace == run.trace, "the settle span is in the run's trace");
    anyhow::ensure!(!settle.attributes.iter().any(|(k, _)| k == "task"), "task named twice: {settle:?}");
    Ok(())
}

/// The span named `name` whose parent is `parent`.
fn child<'a>(all: &'a [Span], name: &str, parent: &Span) -> Option<&'a Span> {
    all.iter().find(|s| s.name == name && s.parent == parent.id)
}

/// The span named `name` whose `task` attribute is `id`.
fn of_task<'a>(all: &'a [Span], name: &str, id: &str) -> Option<&'a Span> {
    all.iter().find(|s| s.name == name && s.attributes.iter().any(|(k, v)| k == "task" && v == id))
}
