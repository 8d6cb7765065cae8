//! mcpgate: a stateless, horizontally scalable gateway for the Model Context Protocol that
//! serves both protocol eras (2026-07-28 and 2025-11-25) from one endpoint.
//!
//! # As a library
//!
//! [`Gateway::builder`] takes a [`Config`] and tools written in Rust — plain async functions
//! over a typed argument struct ([`typed_tool`]), background tools with a progress handle
//! ([`background_tool`]), or any [`Tool`] (a resumable tool that asks the user for input
//! returns [`Outcome::NeedInput`]) — builds a gateway and serves it until a shutdown future
//! resolves. Upstream servers from the config join the same catalog. Runnable examples are in
//! `crates/gateway/examples/`.
//!
//! Lower down, [`app`] is the router (for in-process tests) and [`serve`] serves a listener
//! until a shutdown future resolves; `main.rs` only loads the config and calls them.
#![deny(missing_docs)]

pub mod admin;
pub mod audit;
mod auth;
mod call_context;
mod catalog_parts;
mod catalog_refresh;
pub mod config;
mod connections;
pub mod error;
mod fleet_keys;
mod gateway;
mod heartbeat;
mod http;
mod limits;
mod mcp;
mod member;
mod metrics;
mod origin;
mod pinning;
pub mod policy;
mod principal_slots;
pub mod probe;
mod routes;
mod serve;
pub mod servers;
pub mod shutdown;
mod startup;
pub mod state;
mod tasks;
pub mod telemetry;
mod time;

/// Internals that this crate's own tests, benchmarks and fuzz targets drive directly: no
/// stable API.
#[doc(hidden)]
pub mod internals {
    pub use crate::http::headers;
    pub use crate::mcp::{session, task_view};
    pub use crate::metrics::Metrics;
    pub use crate::time::now_ms;
}

pub use config::Config;
pub use error::{GatewayError, StartupError};
pub use gateway::{Gateway, GatewayBuilder};
/// The MCP wire types (results, content blocks, input requests).
pub use mcpgate_protocol as protocol;
pub use mcpgate_runtime::Principal;
/// Tools, prompts and resources (re-exported for registering custom ones).
pub use mcpgate_runtime::catalog;
pub use mcpgate_runtime::catalog::{
    Failure, Json, Outcome, Progress, Tool, ToolCall, ToolContext, ToolDescriptor, ToolError, ToolOutput, ask,
    background_tool, typed_tool,
};
/// The JSON Schema derive typed tools' arguments use (`#[derive(schemars::JsonSchema)]`).
pub use schemars;
pub use serve::{app, serve, serve_with_admin};
pub use state::AppState;
/// The token a background tool's work watches for cancellation.
pub use tokio_util::sync::CancellationToken;

/// The library example of docs/library.md, compiled as a doctest so it stays true to the API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/library.md")]
struct ReadmeDoctests;
