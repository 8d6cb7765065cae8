//! What mcpgate runs: the `Tool`, `PromptHandler` and `ResourceHandler` traits, the catalog
//! that serves them, the built-in toolsets, and the callers they act for.
//!
//! A tool is written once and serves every workflow: a plain call, a streamed call with
//! progress, and (through the task workers in `worker`) a durable task that any replica may
//! execute.

#![deny(missing_docs)]

pub mod catalog;
mod error;
mod principal;
pub mod task_metrics;
pub mod task_transition;
pub mod toolsets;
pub mod worker;

pub use error::RuntimeError;
pub use principal::{Credential, KeyOwner, Principal};
