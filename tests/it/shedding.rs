//! Load shedding (SEP-2322's state-only `InputRequiredResult`): a replica at its load
//! threshold hands a synchronous call to another replica at the tool's checkpoint, and the
//! replica that gets the client's retry completes it from there without redoing the work.

use serde_json::{Value, json};

use mcpgate_e2e::{Client, Cluster, Gateway};

async fn call(client: &Client, url: &str, params: Value) -> anyhow::Result<Value> {
    let reply = client.modern(url, "tools/call", params).await?.json()?;
    reply.get("result").cloned().ok_or_else(|| anyhow::anyhow!("not a result: {reply}"))
}

fn metric(text: &str, name: &str) -> u64 {
    text.lines().find_map(|l| l.strip_prefix(name)?.trim().parse().ok()).unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_replica_hands_a_checkpointed_call_to_another() -> anyhow::Result<()> {
    // Replica 0 sheds at one request in flight, i.e. always; replica 1 never does.
    let cluster = Cluster::builder(2)
        .env("MCPGATE_TOOLSET", "demo")
        .replica_env(0, "MCPGATE_HTTP_SHED_AT_REQUESTS", "1")
        .start()?;
    let client = Client::new()?;
    let items = json!(["a", "b", "c", "d"]);
    let arguments = json!({"items": items, "stepMs": 20});

    // The busy replica does one item, then hands the call back with its checkpoint only.
    let first =
        call(&client, &cluster.replica_url(0), json!({"name": "process_batch", "arguments": arguments})).await?;
    assert_eq!(first["resultType"], "input_required", "{first}");
    assert!(first.get("inputRequests").is_none(), "a hand-off asks nothing: {first}");
    let state = first["requestState"].as_str().expect("a requestState").to_owned();

    // The retry reaches the busy replica again: one more item, handed back again.
    let params = |state: &str| json!({"name": "process_batch", "arguments": arguments, "requestState": state});
    let second = call(&client, &cluster.replica_url(0), params(&state)).await?;
    assert_eq!(second["resultType"], "input_required", "{second}");
    let state = second["requestState"].as_str().expect("a requestState").to_owned();

    // Another replica completes it from the checkpoint: the two items done are not redone.
    let done = call(&client, &cluster.replica_url(1), params(&state)).await?;
    assert_eq!(done["resultType"], "complete", "{done}");
    let result = &done["structuredContent"];
    assert_eq!(result["processed"], json!(["a: ok", "b: ok", "c: ok", "d: ok"]), "{done}");
    assert_eq!(result["resumedAt"], 2, "{done}");
    assert_eq!(result["processedInThisCall"], 2, "{done}");

    let metrics = |i: usize| format!("http://{}/metrics", cluster.replica(i).addr());
    let (_, busy) = client.get(&metrics(0)).await?;
    assert_eq!(metric(&busy, "mcpgate_calls_handed_off_total"), 2, "{busy}");
    let (_, calm) = client.get(&metrics(1)).await?;
    assert_eq!(metric(&calm, "mcpgate_calls_handed_off_total"), 0, "{calm}");

    // A tool that never checkpoints is not handed off, busy or not.
    let echo = call(&client, &cluster.replica_url(0), json!({"name": "echo", "arguments": {"text": "hi"}})).await?;
    assert_eq!(echo["resultType"], "complete", "{echo}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_follows_an_upstream_that_hands_a_call_on() -> anyhow::Result<()> {
    // The upstream sheds always; mcpgate in front of it retries with the state it hands back.
    let upstream = Gateway::builder().args(&["--toolset", "demo"]).env("MCPGATE_HTTP_SHED_AT_REQUESTS", "1").start()?;
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("mcpgate.toml");
    let table = format!("[[upstream]]\nname = \"busy\"\ntransport = \"http\"\nurl = \"{}\"\n", upstream.url());
    std::fs::write(&config, table)?;
    let front = Gateway::builder().args(&["--config", config.to_str().expect("utf-8 path")]).start()?;
    let client = Client::new()?;

    let params = json!({"name": "busy_process_batch", "arguments": {"items": ["x", "y", "z"], "stepMs": 10}});
    let done = call(&client, &front.url(), params).await?;
    assert_eq!(done["resultType"], "complete", "the front gateway followed the hand-offs: {done}");
    let result = &done["structuredContent"];
    assert_eq!(result["processed"], json!(["x: ok", "y: ok", "z: ok"]), "{done}");
    assert_eq!(result["resumedAt"], 2, "two hand-offs, each from its checkpoint: {done}");
    let (_, metrics) = client.get(&format!("http://{}/metrics", upstream.addr())).await?;
    assert_eq!(metric(&metrics, "mcpgate_calls_handed_off_total"), 2, "{metrics}");
    Ok(())
}
