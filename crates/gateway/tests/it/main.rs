//! Gateway integration tests: the router driven in-process (no sockets unless a test needs a
//! real peer, such as a JWKS server), covering both eras, every rejected input with its HTTP
//! status and JSON-RPC code, SSE streaming and cancellation, JWT auth and configuration.

mod audit;
mod auth;
mod background;
mod config;
mod connect_asking;
mod fleet;
mod inline_answers;
mod legacy;
mod library;
mod listen_limits;
mod modern;
mod mrtr;
mod oauth_connect;
mod ops;
mod personal_tools;
mod policy;
mod rate_limits;
mod search;
mod sentinel_config;
mod servers;
mod store_tls_config;
mod streaming;
mod support;
mod task_admission;
mod task_input;
mod tasks;
mod terminal_cache;
mod transport;
mod unreadable_tasks;
mod vault_reads;
mod waiters;
mod workers;
