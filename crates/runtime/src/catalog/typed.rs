//! Tools written as plain async functions over a typed argument struct: the input schema is
//! derived from the struct (`schemars`), the arguments are decoded before the function runs,
//! and what it returns becomes the tool's result. [`typed_tool`] makes an ordinary tool;
//! [`background_tool`] makes a background tool whose function also gets a [`Progress`]
//! handle and a cancellation token.
//!
//! Invariants: arguments that do not decode are refused with -32602 before any work starts
//! (and before a task is created); an error the function returns is a tool result with
//! `isError: true` (the model sees it and can react), never a protocol error.

use std::future::Future;
use std::marker::PhantomData;

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::{CallToolResult, ToolAnnotations};

use super::context::ToolContext;
use super::outcome::{Failure, Outcome, decode_args};
use super::tool::{BoxFuture, TaskPolicy, Tool, ToolCall, ToolDescriptor};

/// Why a typed tool's work failed: becomes a tool result with `isError: true` whose text is
/// this message, so write it for the model (what went wrong, what to try instead).
///
/// Any error converts into it with `?` (its `Display` text is the message).
#[derive(Debug, Clone)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// An error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        Self { message: message.into() }
    }

    /// The message the model will see.
    pub fn message(&self) -> &str {
        &self.message
    }
}

// No `Display` for `ToolError` itself: that is what lets every `Display` type convert.
impl<E: std::fmt::Display> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self { message: error.to_string() }
    }
}

/// What a typed tool's function may return.
pub trait ToolOutput: Send + 'static {
    /// The tool result.
    fn into_result(self) -> CallToolResult;
}

impl ToolOutput for CallToolResult {
    fn into_result(self) -> CallToolResult {
        self
    }
}

impl ToolOutput for String {
    fn into_result(self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(self)])
    }
}

impl ToolOutput for &'static str {
    fn into_result(self) -> CallToolResult {
        CallToolResult::success(vec![ContentBlock::text(self.to_owned())])
    }
}

/// A value returned as structured content (and, for clients that read only text, as its
/// JSON text).
#[derive(Debug, Clone)]
pub struct Json<T>(pub T);

impl<T: Serialize + Send + 'static> ToolOutput for Json<T> {
    fn into_result(self) -> CallToolResult {
        match serde_json::to_value(&self.0) {
            Ok(value) => {
                let text = value.to_string();
                let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
                result.structured_content = Some(value);
                result
            }
            Err(e) => failed(&format!("the tool's result could not be serialized: {e}")),
        }
    }
}

fn failed(message: &str) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(message.to_owned())]);
    result.is_error = Some(true);
    result
}

fn finish<R: ToolOutput>(outcome: Result<R, ToolError>) -> Outcome<CallToolResult> {
    Outcome::Complete(match outcome {
        Ok(output) => output.into_result(),
        Err(e) => failed(&e.message),
    })
}

/// The input schema of `A`: JSON Schema 2020-12, sub-schemas inlined, no `$schema` or
/// `title` (the tool has its own name).
fn input_schema<A: JsonSchema>() -> Value {
    let schema = SchemaSettings::draft2020_12()
        .with(|s| {
            s.meta_schema = None;
            s.inline_subschemas = true;
        })
        .for_deserialize()
        .into_generator()
        .into_root_schema_for::<A>();
    let mut value = schema.to_value();
    if let Value::Object(map) = &mut value {
        map.remove("title");
    }
    value
}

/// A tool backed by an async function of its typed arguments: made by [`typed_tool`] (`W` is
/// [`Plain`]) or [`background_tool`] (`W` is [`Background`]).
pub struct TypedTool<A, W> {
    descriptor: ToolDescriptor,
    work: W,
    args: PhantomData<fn(A)>,
}

impl<A, W> TypedTool<A, W> {
    /// Sets the display title.
    #[must_use]
    pub fn title(mut self, title: &str) -> Self {
        self.descriptor = self.descriptor.title(title);
        self
    }

    /// Sets behaviour hints (read-only, destructive, idempotent, open-world).
    #[must_use]
    pub fn annotations(mut self, annotations: ToolAnnotations) -> Self {
        self.descriptor = self.descriptor.annotations(annotations);
        self
    }

    /// Sets whether a task whose run was interrupted may run the tool again (default true).
    #[must_use]
    pub fn retry_safe(mut self, safe: bool) -> Self {
        self.descriptor = self.descriptor.retry_safe(safe);
        self
    }

    /// Sets the task policy (whether a task-capable client may, or must, call it as a task).
    #[must_use]
    pub fn task_policy(mut self, policy: TaskPolicy) -> Self {
        self.descriptor = self.descriptor.task_policy(policy);
        self
    }
}

/// How a typed tool runs its function on decoded arguments ([`Plain`] or [`Background`]).
pub trait Work<A>: Send + Sync + 'static {
    /// Runs the function for one call.
    fn run(&self, args: A, cx: &ToolContext) -> BoxFuture<'static, Outcome<CallToolResult>>;
}

/// The function of a [`typed_tool`]: `Fn(A) -> Future<Output = Result<R, ToolError>>`.
pub struct Plain<F>(F);

/// The function of a [`background_tool`]: `Fn(A, Progress, CancellationToken) -> Future<..>`.
pub struct Background<F>(F);

impl<A, F, Fut, R> Work<A> for Plain<F>
where
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    R: ToolOutput,
{
    fn run(&self, args: A, _cx: &ToolContext) -> BoxFuture<'static, Outcome<CallToolResult>> {
        let work = (self.0)(args);
        Box::pin(async move { finish(work.await) })
    }
}

impl<A, F, Fut, R> Work<A> for Background<F>
where
    F: Fn(A, Progress, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    R: ToolOutput,
{
    fn run(&self, args: A, cx: &ToolContext) -> BoxFuture<'static, Outcome<CallToolResult>> {
        let work = (self.0)(args, Progress { cx: cx.clone() }, cx.cancellation_token());
        Box::pin(async move { finish(work.await) })
    }
}

impl<A, W> Tool for TypedTool<A, W>
where
    A: DeserializeOwned + Send + 'static,
    W: Work<A>,
{
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        decode_args::<A>(arguments).map(drop)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        match decode_args::<A>(&call.arguments) {
            Ok(args) => self.work.run(args, cx),
            Err(failure) => Box::pin(async move { Outcome::Failed(failure) }),
        }
    }
}

/// A tool named `name` that runs `f` on its arguments decoded as `A`; `A`'s JSON Schema is
/// the tool's input schema.
///
/// ```
/// use mcpgate_runtime::catalog::{typed_tool, ToolError};
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Add {
///     /// The first number.
///     a: f64,
///     /// The second number.
///     b: f64,
/// }
///
/// async fn add(args: Add) -> Result<String, ToolError> {
///     Ok(format!("{}", args.a + args.b))
/// }
///
/// let tool = typed_tool("add", "Add two numbers.", add).title("Add");
/// # let _ = tool;
/// ```
pub fn typed_tool<A, F, Fut, R>(name: &str, description: &str, f: F) -> TypedTool<A, Plain<F>>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    R: ToolOutput,
{
    TypedTool {
        descriptor: ToolDescriptor::new(name, description, input_schema::<A>()),
        work: Plain(f),
        args: PhantomData,
    }
}

/// How a background tool reports how far it got: the message and fraction become the task's
/// status (what `task_status` and `tasks/get` show), or progress notifications when the call
/// runs inside a request that asked for them.
#[derive(Debug, Clone)]
pub struct Progress {
    cx: ToolContext,
}

impl Progress {
    /// Reports `message` and how much is done (`fraction`, 0 to 1).
    pub async fn update(&self, message: &str, fraction: f64) {
        let fraction = if fraction.is_finite() { fraction.clamp(0.0, 1.0) } else { 0.0 };
        self.cx.progress(fraction, Some(1.0), Some(message)).await;
    }
}

/// A background tool named `name`: called by a client that takes no tasks, it answers at once
/// with a task id (followed with the companion tools `task_status`, `task_result`,
/// `task_cancel`), and a task-capable client gets an ordinary task. `f` runs as a durable task
/// on any replica, with a [`Progress`] handle and a token cancelled when the task is (it
/// should then stop soon).
///
/// ```
/// use std::time::Duration;
/// use mcpgate_runtime::catalog::{background_tool, Progress, ToolError};
/// use tokio_util::sync::CancellationToken;
///
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Report {
///     /// What the report is about.
///     topic: String,
/// }
///
/// async fn report(args: Report, progress: Progress, cancel: CancellationToken) -> Result<String, ToolError> {
///     for part in 1..=3 {
///         tokio::select! {
///             () = tokio::time::sleep(Duration::from_secs(1)) => {}
///             () = cancel.cancelled() => return Err(ToolError::new("cancelled")),
///         }
///         progress.update(&format!("wrote part {part} of 3"), f64::from(part) / 3.0).await;
///     }
///     Ok(format!("A report on {}.", args.topic))
/// }
///
/// let tool = background_tool("report", "Write a report (takes a while).", report);
/// # let _ = tool;
/// ```
pub fn background_tool<A, F, Fut, R>(name: &str, description: &str, f: F) -> TypedTool<A, Background<F>>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, Progress, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<R, ToolError>> + Send + 'static,
    R: ToolOutput,
{
    let descriptor =
        ToolDescriptor::new(name, description, input_schema::<A>()).task_policy(TaskPolicy::Optional).background(true);
    TypedTool { descriptor, work: Background(f), args: PhantomData }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::principal::Principal;
    use mcpgate_protocol::capabilities::ClientCapabilities;
    use serde_json::json;

    #[derive(serde::Deserialize, JsonSchema)]
    struct Add {
        /// The first number.
        a: f64,
        b: f64,
    }

    #[derive(Serialize)]
    struct Sum {
        sum: f64,
    }

    async fn add(args: Add) -> Result<Json<Sum>, ToolError> {
        if args.b < 0.0 {
            return Err(ToolError::new("b must not be negative"));
        }
        Ok(Json(Sum { sum: args.a + args.b }))
    }

    fn cx() -> ToolContext {
        ToolContext::detached(Principal::anonymous(), ClientCapabilities::default())
    }

    async fn run(tool: &impl Tool, arguments: Value) -> Outcome<CallToolResult> {
        tool.call(ToolCall { arguments, ..Default::default() }, &cx()).await
    }

    #[test]
    fn the_input_schema_is_derived_from_the_arguments() {
        let tool = typed_tool("add", "Add.", add);
        let schema = Value::Object(tool.descriptor().info.input_schema.clone());
        assert_eq!(schema["type"], "object", "{schema}");
        assert_eq!(schema["properties"]["a"]["type"], "number", "{schema}");
        assert_eq!(schema["properties"]["a"]["description"], "The first number.", "{schema}");
        assert_eq!(schema["required"], json!(["a", "b"]), "{schema}");
        assert!(schema.get("$schema").is_none() && schema.get("title").is_none(), "{schema}");
    }

    #[tokio::test]
    async fn results_errors_and_bad_arguments() {
        let tool = typed_tool("add", "Add.", add);
        let Outcome::Complete(ok) = run(&tool, json!({"a": 1, "b": 2})).await else { panic!("not complete") };
        assert_eq!(ok.structured_content, Some(json!({"sum": 3.0})));
        assert_eq!(ok.is_error, None);
        let Outcome::Complete(err) = run(&tool, json!({"a": 1, "b": -2})).await else { panic!("not complete") };
        assert_eq!(err.is_error, Some(true));
        assert!(matches!(run(&tool, json!({"a": "one"})).await, Outcome::Failed(Failure::InvalidArguments(_))));
        assert!(tool.check(&json!({"a": 1})).is_err(), "a missing field is refused before any work");
    }

    #[tokio::test]
    async fn a_background_tool_is_marked_and_gets_its_cancellation() {
        #[derive(serde::Deserialize, JsonSchema)]
        struct Nothing {}
        let tool =
            background_tool("wait", "Wait.", |_: Nothing, progress: Progress, cancel: CancellationToken| async move {
                progress.update("waiting", 2.0).await;
                Ok::<_, ToolError>(if cancel.is_cancelled() { "cancelled" } else { "running" })
            });
        assert!(tool.descriptor().background);
        assert_eq!(tool.descriptor().task_policy, TaskPolicy::Optional);
        let context = cx();
        let Outcome::Complete(running) =
            tool.call(ToolCall { arguments: json!({}), ..Default::default() }, &context).await
        else {
            panic!("not complete")
        };
        assert_eq!(running.content, vec![ContentBlock::text("running".to_owned())]);
        context.cancellation_token().cancel();
        let Outcome::Complete(cancelled) =
            tool.call(ToolCall { arguments: json!({}), ..Default::default() }, &context).await
        else {
            panic!("not complete")
        };
        assert_eq!(cancelled.content, vec![ContentBlock::text("cancelled".to_owned())]);
    }
}
