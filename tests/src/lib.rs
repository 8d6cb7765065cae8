//! Harness for end-to-end tests that run real processes on loopback: `mcpgate` replicas, the
//! `redis-server` they share and an `nginx` load balancer in front; real upstream MCP servers,
//! and an OAuth authorization server with a server it protects.
//!
//! Invariants: every process a test starts is killed and reaped when its handle drops; every
//! wait is bounded; logs of a failed run are printed so a red CI run explains itself.

mod client;
mod cluster;
mod gateway;
mod load;
mod nginx;
mod oauth_servers;
mod probe;
mod stand_in;
mod upstreams;
mod wait;

pub use client::{Client, EventStream};
pub use cluster::{CLUSTER_SEAL_KEYS, Cluster, ClusterBuilder};
pub use gateway::{Gateway, GatewayBuilder, binary, example_binary, loadgen_binary, run_to_end};
pub use load::{COUNTED_RUNS, Load, LoadReport, counted_runs_config};
pub use mcpgate_client::Reply;
pub use nginx::Nginx;
pub use oauth_servers::{HostileOAuthServer, OAuthServers, UserAgent};
pub use stand_in::{StandInRequest, next_request};
pub use upstreams::{HttpServer, fastmcp_python, fixture, free_port, server_everything};
pub use wait::{Look, Observed, PATIENCE, TaskPoll, Until, patience, poll_task, settle, wait_for, wait_for_blocking};
