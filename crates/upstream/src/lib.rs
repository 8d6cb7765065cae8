//! mcpgate's MCP client side: the servers behind the gateway ("upstreams"), reached over
//! stdio or Streamable HTTP in either protocol era, each with its own concurrency limit,
//! timeouts and circuit breaker; and their tools, prompts and resources as catalog entries
//! (`UpstreamTool` implements the runtime's `Tool`), so they serve plain calls and durable
//! gateway tasks alike.
//!
//! Knows nothing of HTTP serving or of the task store: the gateway wires configuration →
//! [`Federation`] → catalog.

mod breaker;
pub mod config;
mod connect_ask;
mod connect_tool;
mod continuation;
mod entries;
mod error;
mod expand;
mod exposed_tool;
mod federation;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod glob;
pub mod import;
mod input_relay;
pub mod oauth;
mod personal_tools;
mod rpc;
mod task_relay;
mod tls;
mod token_cache;
mod token_exchange;
mod transport;
mod upstream;

pub use breaker::BreakerState;
pub use config::{
    AnnotationOverride, EraChoice, OAuthConfig, TaskMode, TokenExchangeConfig, ToolFilter, ToolOverride, TransportKind,
    UpstreamAuth, UpstreamConfig, UpstreamLimits,
};
pub use entries::{UpstreamPrompt, UpstreamResource, UpstreamTool};
pub use error::{Cause, UpstreamError};
pub use federation::{Contribution, Federation, UpstreamStatus};
pub use rpc::Progress;
pub use token_exchange::{EXCHANGE_FAILURE_KINDS, ExchangeStats};
pub use upstream::{ERROR_KINDS, LATENCY_BUCKETS, Lists, Request, Upstream, UpstreamStats};
