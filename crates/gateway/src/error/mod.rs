//! The gateway crate's errors — `GatewayError` for a request, `StartupError` for loading the
//! configuration and building a replica — and the one place where an error becomes an HTTP
//! status, a JSON-RPC error object and response headers (`wire`).
//!
//! Invariants: an error keeps its causes as `source`s (never flattened to text on the way), and
//! the wire answer is decided by walking that chain (`chain::cause_ref`), so a store error
//! anywhere behind a request's failure gets the store's answer; the client-facing message of an
//! error never carries internal detail (that goes to the log, which prints the whole chain);
//! every response to a request whose id could be read echoes that id; the status of an error
//! depends only on the error and the request's era. A start-up error never reaches a client: it
//! stops the replica.

pub mod chain;
mod connect;
mod request;
mod startup;
mod unquoted_json;
mod wire;

pub use chain::{BoxError, Chain, cause_ref, is_caused_by};
pub use connect::ConnectFailure;
pub use request::GatewayError;
pub(crate) use request::clip;
pub use startup::StartupError;
pub use unquoted_json::UnquotedJsonError;
pub use wire::{ErrorReply, Wire};
