//! The reference server: mcpgate's benchmark tools (contract §1 of issue 31) on rmcp's own
//! handler, router and task manager, written the way rmcp's task example writes them.
//!
//! - `echo` `{"text": T}` answers one text block T (synchronous).
//! - `slow_compute` `{"seconds": S, "label": L}` sleeps S seconds and answers one text block
//!   `Computed L in S s` (S as Rust's `f64` Display prints it, as mcpgate's tool does). For a
//!   request that declares the tasks extension it runs as a task through rmcp's [`TaskManager`]
//!   (`resultType: "task"`, then `tasks/get`); otherwise synchronously through the router.
//!
//! Invariant: one [`TaskManager`] per process, shared by every clone (the stateless transport
//! makes a handler per request from the clone), so any request sees every task.

use std::sync::Arc;
use std::time::Duration;

use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::ToolCallContext;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock, CreateTaskResult,
    GetTaskParams, GetTaskResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, ServerHandler, schemars, tool, tool_router};
use serde::Deserialize;

/// Longest `slow_compute` accepted (mcpgate's bound).
const MAX_SECONDS: f64 = 600.0;

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EchoArgs {
    /// Text to echo back.
    text: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct ComputeArgs {
    /// How long to compute, in seconds (0 to 600).
    #[serde(default)]
    seconds: f64,
    /// What to name in the answer.
    #[serde(default)]
    label: Option<String>,
}

impl ComputeArgs {
    fn check(self) -> Result<Self, McpError> {
        if (0.0..=MAX_SECONDS).contains(&self.seconds) {
            Ok(self)
        } else {
            Err(McpError::invalid_params(format!("invalid arguments: seconds must be 0 to {MAX_SECONDS}"), None))
        }
    }

    /// Sleeps, then answers (the same work in a task and in a synchronous call).
    async fn run(self) -> CallToolResult {
        tokio::time::sleep(Duration::from_secs_f64(self.seconds)).await;
        let label = self.label.unwrap_or_else(|| "result".to_owned());
        CallToolResult::success(vec![ContentBlock::text(format!("Computed {label} in {} s", self.seconds))])
    }
}

/// The handler. Cloned once per request by the transport: both fields are shared.
#[derive(Clone)]
pub(crate) struct Reference {
    /// Built once: the router holds the tools' schemas.
    tool_router: Arc<ToolRouter<Reference>>,
    tasks: TaskManager,
    options: TaskOptions,
}

#[tool_router]
impl Reference {
    /// A server whose tasks live `task_ttl_ms` (rmcp's default when `None`).
    pub(crate) fn new(task_ttl_ms: Option<u64>) -> Self {
        let mut options = TaskOptions::default();
        if let Some(ttl) = task_ttl_ms {
            options = options.with_ttl_ms(ttl);
        }
        Self { tool_router: Arc::new(Self::tool_router()), tasks: TaskManager::new(), options }
    }

    #[tool(description = "Echo back the given text.")]
    async fn echo(&self, Parameters(EchoArgs { text }): Parameters<EchoArgs>) -> Result<CallToolResult, McpError> {
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }

    #[tool(description = "Computes for `seconds` seconds; runs as a task when the client supports tasks.")]
    async fn slow_compute(&self, Parameters(args): Parameters<ComputeArgs>) -> Result<CallToolResult, McpError> {
        Ok(args.check()?.run().await)
    }
}

impl ServerHandler for Reference {
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        // SEP-2663: a task only for a request that declared the tasks extension.
        let supports_tasks = context.client_capabilities().is_some_and(|caps| caps.supports_tasks());
        if request.name == "slow_compute" && supports_tasks {
            let args: ComputeArgs =
                serde_json::from_value(serde_json::Value::Object(request.arguments.unwrap_or_default()))
                    .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
            let args = args.check()?;
            let task = self.tasks.spawn(self.options.clone(), move |ctx| {
                Box::pin(async move {
                    // Cooperative cancellation, as rmcp's example does it.
                    tokio::select! {
                        () = ctx.cancelled() => Err(TaskExit::Cancelled),
                        result = args.run() => Ok(result),
                    }
                })
            });
            return Ok(CallToolResponse::Task(CreateTaskResult::new(task)));
        }
        self.tool_router.call(ToolCallContext::new(self, request, context)).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(self.tool_router.list_all()))
    }

    /// For the transport's check of `Mcp-Param-*` headers against a tool's schema (SEP-2243).
    fn get_tool(&self, name: &str) -> Option<Tool> {
        self.tool_router.get(name).cloned()
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.tasks.get_task(&request.task_id)?))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel_task(&request.task_id)
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
    }
}
