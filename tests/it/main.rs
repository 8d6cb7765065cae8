//! End-to-end tests against real `mcpgate` processes on loopback.

mod admin;
mod at_rest;
mod background;
mod bridging;
mod cluster;
mod deploy;
mod examples;
mod faults;
mod federation;
mod hostile_upstream;
mod idempotency;
mod jwt;
mod limits;
mod listen;
mod mrtr;
mod oauth_calls;
mod oauth_client;
mod oauth_cluster;
mod oauth_connect;
mod overrides;
mod pinning;
mod process;
mod redis_cluster;
mod shedding;
mod telemetry;
mod token_exchange;
