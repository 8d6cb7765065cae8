//! Harness for end-to-end tests that run real `mcpgate` processes on loopback.
//!
//! Invariants: every process a test starts is killed and reaped when its handle drops; every
//! wait is bounded; logs of a failed run are printed so a red CI run explains itself.

mod client;
mod gateway;

pub use client::{Client, Reply};
pub use gateway::{Gateway, GatewayBuilder, binary, run_to_end};
