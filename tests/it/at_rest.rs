//! Task payloads encrypted at rest, through nginx in front of three replicas with Redis: a
//! task created on one replica, asked for input, answered on another and completed has its
//! arguments and result in no readable form in a dump of Redis, while every replica serves
//! them to the client in plain.

use std::process::Command;

use serde_json::json;

use mcpgate_e2e::Client;

use crate::mrtr::{accept, cluster, tasking, wait_for};

/// Everything Redis on `port` holds, as `SAVE` writes it (uncompressed, so plain text in it
/// would be found).
pub(crate) fn dump(port: u16) -> anyhow::Result<String> {
    let cli = |args: &[&str]| -> anyhow::Result<String> {
        let out = Command::new("redis-cli").args(["-p", &port.to_string()]).args(args).output()?;
        anyhow::ensure!(out.status.success(), "redis-cli {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    cli(&["CONFIG", "SET", "rdbcompression", "no"])?;
    cli(&["SAVE"])?;
    let dir = cli(&["CONFIG", "GET", "dir"])?;
    let file = cli(&["CONFIG", "GET", "dbfilename"])?;
    let (dir, file) = (dir.lines().nth(1).unwrap_or_default(), file.lines().nth(1).unwrap_or_default());
    Ok(String::from_utf8_lossy(&std::fs::read(std::path::Path::new(dir).join(file))?).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_dump_of_a_completed_task_holds_no_plain_argument_or_result() -> anyhow::Result<()> {
    let mut cluster = cluster(3).start()?;
    let client = Client::new()?;
    let url = cluster.url();
    let secret = "quarterly-payroll-9f3c2e.db";

    let created =
        tasking(&client, &url, "tools/call", json!({"name": "confirm_delete", "arguments": {"filename": secret}}))
            .await?;
    let id = created["result"]["taskId"].as_str().ok_or_else(|| anyhow::anyhow!("no task: {created}"))?.to_owned();
    wait_for(&client, &url, &id, "input_required").await?;
    let ack = tasking(
        &client,
        &url,
        "tasks/update",
        json!({"taskId": id, "inputResponses": {"confirm": accept(json!({"confirm": true}))}}),
    )
    .await?;
    anyhow::ensure!(ack["result"]["resultType"] == "complete", "{ack}");
    let done = wait_for(&client, &url, &id, "completed").await?;
    let text = done["result"]["content"][0]["text"].as_str().unwrap_or_default();
    anyhow::ensure!(text == format!("Deleted {secret}"), "the client reads the result in plain: {done}");

    let dump = dump(cluster.redis().port())?;
    anyhow::ensure!(!dump.contains("quarterly-payroll"), "the argument or the result is in the dump");
    // The dump is readable: what stays in plain for operators is in it.
    for visible in [id.as_str(), "confirm_delete", "completed"] {
        anyhow::ensure!(dump.contains(visible), "{visible} is not in the dump");
    }
    Ok(())
}
