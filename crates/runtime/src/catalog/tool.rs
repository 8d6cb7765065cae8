//! The `Tool` trait: a resumable unit of work. An invocation gets the arguments, the input
//! responses received so far and its own continuation state from the previous round, and
//! returns a result, a request for input, or a failure.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

use mcpgate_protocol::JsonObject;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::input::InputResponses;
use mcpgate_protocol::tool::{CallToolResult, TaskSupport, Tool as ToolInfo, ToolAnnotations};

use super::context::ToolContext;
use super::outcome::{Failure, Outcome};

/// A boxed future borrowed from the tool and its context.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Whether a tool may, must or must not run as a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskPolicy {
    /// Always synchronous.
    #[default]
    Forbidden,
    /// Synchronous or as a task.
    Optional,
    /// Only as a task.
    Required,
    /// Synchronous, unless the client asks for a task (2025-11-25 `params.task`) or the call
    /// is still running after this long and the client can take a task (2026-07-28): the
    /// gateway then turns the running call into a task.
    Auto {
        /// How long a call runs before it becomes a task.
        after: std::time::Duration,
    },
}

impl TaskPolicy {
    /// The legacy `execution.taskSupport` value.
    pub fn task_support(self) -> TaskSupport {
        match self {
            Self::Forbidden => TaskSupport::Forbidden,
            Self::Optional | Self::Auto { .. } => TaskSupport::Optional,
            Self::Required => TaskSupport::Required,
        }
    }
}

/// What `tools/list` shows of a tool, plus its task policy.
#[derive(Debug, Clone)]
pub struct ToolDescriptor {
    /// The wire descriptor (without `execution`, which is derived per era).
    pub info: ToolInfo,
    /// Task policy.
    pub task_policy: TaskPolicy,
    /// Whether a task whose run was interrupted (its replica died, or shut down past the
    /// grace period) may run the tool again. When false, such a task fails instead, saying it
    /// was interrupted: the tool runs at most once.
    pub retry_safe: bool,
    /// A background tool: a client that cannot take a task (it declared no task support)
    /// still gets the call as a task, answered at once with the task id and how to follow it
    /// with the companion tools (`task_status`, `task_result`, `task_cancel`).
    pub background: bool,
    /// The upstream server the tool comes from (`None` for a tool of this gateway): calls
    /// to it count against that upstream's rate limits.
    pub upstream: Option<std::sync::Arc<str>>,
}

impl ToolDescriptor {
    /// A descriptor with a name, a description and an input schema (a JSON object).
    pub fn new(name: &str, description: &str, input_schema: Value) -> Self {
        let input_schema = match input_schema {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        };
        Self {
            info: ToolInfo {
                name: name.to_owned(),
                title: None,
                description: Some(description.to_owned()),
                input_schema,
                output_schema: None,
                annotations: None,
                execution: None,
                icons: None,
                meta: None,
            },
            task_policy: TaskPolicy::Forbidden,
            retry_safe: true,
            background: false,
            upstream: None,
        }
    }

    /// Sets the display title.
    #[must_use]
    pub fn title(mut self, title: &str) -> Self {
        self.info.title = Some(title.to_owned());
        self
    }

    /// Sets behaviour hints.
    #[must_use]
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.info.annotations = Some(annotations);
        self
    }

    /// Sets the output schema.
    #[must_use]
    pub fn output_schema(mut self, schema: Value) -> Self {
        if let Value::Object(map) = schema {
            self.info.output_schema = Some(map);
        }
        self
    }

    /// Sets whether an interrupted task may run the tool again.
    #[must_use]
    pub fn retry_safe(mut self, safe: bool) -> Self {
        self.retry_safe = safe;
        self
    }

    /// Makes it a background tool (see [`ToolDescriptor::background`]); it may then run as a
    /// task whatever its task policy says.
    #[must_use]
    pub fn background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Sets the task policy.
    #[must_use]
    pub fn task_policy(mut self, policy: TaskPolicy) -> Self {
        self.task_policy = policy;
        self
    }
}

/// One invocation's input.
#[derive(Debug, Clone, Default)]
pub struct ToolCall {
    /// Arguments (always a JSON object).
    pub arguments: Value,
    /// Answers to input requests: those of the previous round, plus (within one call's
    /// rounds, or one task) those of every earlier round, so no question is asked twice.
    pub input_responses: InputResponses,
    /// The continuation state the previous round returned.
    pub state: Option<Value>,
}

/// A tool.
pub trait Tool: Send + Sync + 'static {
    /// The descriptor (constant for the tool's lifetime).
    fn descriptor(&self) -> &ToolDescriptor;

    /// Runs one round of the tool.
    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>>;

    /// Checks the arguments before a call is accepted as a task, so bad input gets its error
    /// at once instead of from a worker later. Must agree with what `call` accepts; the
    /// default accepts anything (the tool then reports bad arguments when it runs).
    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        let _ = arguments;
        Ok(())
    }

    /// What the tool must know before it can run as a task at all, asked with multi-round
    /// input while the `tools/call` is still synchronous; the task is created once this says
    /// `Complete(())`, and its first run receives the answers and state gathered here.
    /// `NeedInput` asks (keys unique across rounds), `Failed` refuses. The default is ready.
    fn preflight(&self, call: &ToolCall, capabilities: &ClientCapabilities) -> Outcome<()> {
        let _ = (call, capabilities);
        Outcome::Complete(())
    }
}
