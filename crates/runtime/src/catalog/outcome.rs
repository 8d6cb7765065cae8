//! What a tool, prompt or resource returns: a result, a request for more input, or a failure.
//!
//! Invariant: failures are plain data here; the gateway alone turns them into a status and a
//! JSON-RPC code (for tasks, the code is stored and the status never exists).

use serde_json::Value;

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::tool::CallToolResult;

/// The result of one invocation.
#[derive(Debug)]
pub enum Outcome<T> {
    /// Done.
    Complete(T),
    /// The caller must answer these requests and call again; `state` is the continuation the
    /// next round receives back.
    NeedInput {
        /// Requests keyed by names unique within the call.
        requests: InputRequests,
        /// Continuation state, if the next round needs any.
        state: Option<Value>,
    },
    /// A protocol-level failure.
    Failed(Failure),
}

/// Why an invocation failed.
///
/// Its variants carry text, not a `source`, by design: a failure is the contract between a
/// tool (of any crate) and its caller, cloned into a task's outcome and, but for `Internal`,
/// sent to the client as a whole (an `isError` text, a JSON-RPC message); a cause worth
/// keeping is logged where the failure is made.
#[derive(Debug, Clone)]
pub enum Failure {
    /// The request is wrong (what the protocol carries: a `requestState`, an answer, a hidden
    /// argument named by the caller): a -32602 protocol error.
    InvalidParams(String),
    /// The arguments do not fit the tool's input schema or its own checks. To a `tools/call`
    /// this is a tool result with `isError: true` whose text the model reads and can correct
    /// (SEP-1303, 2025-11-25 and 2026-07-28), not a protocol error; elsewhere (a prompt's
    /// arguments) it is -32602 like [`Failure::InvalidParams`].
    InvalidArguments(String),
    /// The call needs a client capability the request did not declare.
    MissingCapability {
        /// What the client must declare.
        required: Box<ClientCapabilities>,
        /// Client-safe explanation.
        message: String,
    },
    /// A resource URI nothing serves.
    ResourceNotFound(String),
    /// An internal fault (the text is logged, not sent).
    Internal(String),
    /// Something the call depends on failed or is unavailable (an upstream server, an
    /// interrupted run); the text is client-safe and sent as it is.
    Unavailable(String),
}

/// Decodes tool arguments (a JSON object) into a typed struct, reporting a client-safe error.
pub fn decode_args<T: serde::de::DeserializeOwned>(args: &Value) -> Result<T, Failure> {
    // Text by design: the model reads the refusal as it is (see `Failure`).
    T::deserialize(args).map_err(|e| Failure::InvalidArguments(format!("invalid arguments: {e}")))
}

impl Outcome<CallToolResult> {
    /// The outcome a tool call answers with: arguments the tool refused become a result with
    /// `isError: true` and the refusal as its text (SEP-1303), so the model sees it.
    pub fn refused_arguments_as_result(self) -> Self {
        match self {
            Outcome::Failed(Failure::InvalidArguments(message)) => Outcome::Complete(CallToolResult::error(message)),
            other => other,
        }
    }
}
