//! A gateway serving one tool written in Rust: a plain async function over a typed argument
//! struct, whose JSON Schema is derived from the struct.
//!
//! Run it with `cargo run -p mcpgate --example typed_tool` (settings from `MCPGATE_*`
//! variables, e.g. `MCPGATE_LISTEN=127.0.0.1:9000`), then call `convert_temperature` with any
//! MCP client at the printed URL + `/mcp`.

use mcpgate::{Gateway, Json, ToolError, typed_tool};
use serde::{Deserialize, Serialize};

/// The tool's arguments: doc comments become the schema's descriptions.
#[derive(Deserialize, schemars::JsonSchema)]
struct Convert {
    /// The temperature to convert.
    value: f64,
    /// The unit it is in: "C" or "F".
    from: String,
}

/// The tool's structured result.
#[derive(Serialize)]
struct Converted {
    value: f64,
    unit: &'static str,
}

async fn convert(args: Convert) -> Result<Json<Converted>, ToolError> {
    match args.from.as_str() {
        "C" => Ok(Json(Converted { value: args.value * 9.0 / 5.0 + 32.0, unit: "F" })),
        "F" => Ok(Json(Converted { value: (args.value - 32.0) * 5.0 / 9.0, unit: "C" })),
        other => Err(ToolError::new(format!("unknown unit {other:?}: use \"C\" or \"F\""))),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Every MCPGATE_* setting applies (Redis, auth, ...); no built-in toolset.
    let config = mcpgate::config::load_with_env("toolset = []", &|name| std::env::var(name).ok())?;
    let gateway = Gateway::builder(config)
        .tool(typed_tool("convert_temperature", "Convert a temperature between Celsius and Fahrenheit.", convert))
        .build()
        .await?;
    let (listener, addr) = gateway.bind().await?;
    println!("listening on http://{addr}");
    gateway.serve(listener, mcpgate::shutdown::signal()).await?;
    Ok(())
}
