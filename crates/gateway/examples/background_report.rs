//! A gateway serving a background tool written in Rust: a client that knows no tasks gets a
//! task id at once and follows the work with `task_status` (status, progress, message),
//! `task_result` and `task_cancel`; a task-capable client gets an ordinary task. With
//! `MCPGATE_REDIS_URL` set, every replica running this program shares the tasks.
//!
//! Run it with `cargo run -p mcpgate --example background_report`.

use std::time::Duration;

use mcpgate::{CancellationToken, Gateway, Progress, ToolError, background_tool};
use serde::Deserialize;

#[derive(Deserialize, schemars::JsonSchema)]
struct Report {
    /// What the report is about.
    topic: String,
    /// How many sections to write (1 to 20), one per second.
    sections: u32,
}

async fn write_report(args: Report, progress: Progress, cancel: CancellationToken) -> Result<String, ToolError> {
    if !(1..=20).contains(&args.sections) {
        return Err(ToolError::new("sections must be 1 to 20"));
    }
    for section in 1..=args.sections {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs(1)) => {}
            // Cancelled (task_cancel, tasks/cancel, or its lifetime ran out): stop now.
            () = cancel.cancelled() => return Err(ToolError::new("cancelled")),
        }
        let message = format!("Wrote section {section} of {}", args.sections);
        progress.update(&message, f64::from(section) / f64::from(args.sections)).await;
    }
    Ok(format!("Report on {}: {} sections.", args.topic, args.sections))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = mcpgate::config::load_with_env("toolset = []", &|name| std::env::var(name).ok())?;
    let report =
        background_tool("write_report", "Write a report on a topic; takes a second per section.", write_report);
    let gateway = Gateway::builder(config).tool(report.title("Write a report")).build().await?;
    let (listener, addr) = gateway.bind().await?;
    println!("listening on http://{addr}");
    gateway.serve(listener, mcpgate::shutdown::signal()).await?;
    Ok(())
}
