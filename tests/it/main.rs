//! End-to-end tests against real `mcpgate` processes on loopback.

mod cluster;
mod deploy;
mod faults;
mod jwt;
mod mrtr;
mod process;
mod redis_cluster;
