//! `tools/call`: validates the call, then runs it now or makes it a task.
//!
//! Who decides: in 2026-07-28 the server does, per request: a tool whose policy allows tasks
//! becomes one when the request declares the tasks extension, and a tool that requires one
//! is refused (-32021) without it. In 2025-11-25 the client does, with `params.task`, within
//! what the tool's `execution.taskSupport` allows; older versions have no tasks.

use axum::http::HeaderMap;
use bytes::Bytes;
use serde_json::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::{ClientCapabilities, TASKS_EXTENSION};
use mcpgate_protocol::tool::{CallToolParams, CallToolResult};
use mcpgate_runtime::catalog::{Failure, Outcome, TaskPolicy, ToolCall};

use super::background;
use super::invoke::ask;
use crate::call_context::CallContext;
use crate::error::{GatewayError, clip};
use crate::http::headers::check_params;
use crate::mcp::render;
use crate::mcp::request_state::{Mode, Round, Target};
use crate::mcp::tool_lookup::ToolLookup;
use crate::mcp::work::Prepared;
use crate::policy::{Arguments, Item, Use};
use crate::state::AppState;
use crate::tasks::{self, TaskPlan, TtlRequest};

/// What to do with a tool call.
pub(in crate::mcp) enum ToolPlan {
    /// Run it within this request.
    Run(Prepared),
    /// Create a task for it.
    Task(TaskPlan),
    /// Answer now: the call needs input before its task can start.
    Ask(Bytes),
}

/// Validates a tool call (known tool, mirrored `Mcp-Param-*` headers, the echoed
/// requestState, task rules) and plans it. `wrapped`: it came through a search server's
/// `call_tool` (see `search::unwrap`); `tool`: the request's one look-up of its tool.
pub(in crate::mcp) async fn call_tool(
    state: &AppState,
    headers: &HeaderMap,
    cx: &CallContext,
    mut params: CallToolParams,
    wrapped: bool,
    mut tool: ToolLookup,
) -> Result<ToolPlan, GatewayError> {
    let catalog = state.catalog.load();
    let unknown = || GatewayError::invalid_params(format!("Unknown tool: {}", clip(&params.name)));
    // Outside a virtual server's selection a tool does not exist there (not a denial); on a
    // search server neither does an upstream tool under a name of its own two.
    if !cx.endpoint.selects_tool(&params.name)
        || (cx.endpoint.searches() && mcpgate_runtime::catalog::search::is_reserved(&params.name))
    {
        return Err(unknown());
    }
    // The snapshot's tool, or one of this caller's own (an `auth = "oauth"` upstream's).
    let (tool, header_params) = tool.find(&catalog, &params.name, &cx.principal).await.cloned().ok_or_else(unknown)?;
    let tool = &tool;
    // Before anything is charged or stored; a task run later re-checks nothing.
    let used = Use {
        target: Item::Tool(&params.name),
        upstream: tool.descriptor().upstream.as_deref(),
        arguments: params.arguments.as_ref().map_or(Arguments::None, Arguments::Json),
    };
    cx.endpoint.check(&cx.endpoint.caller(&cx.principal), used)?;
    // The `Mcp-Param-*` headers mirror the arguments of the tool the request names; those of
    // a tool called through `call_tool` are inside the wrapper's arguments, not in headers.
    if cx.era == Era::Modern && !wrapped {
        check_params(headers, &header_params, params.arguments.as_ref())?;
    }
    let as_task = task_decision(cx, &params, tool.descriptor().task_policy)?;
    // Charged once the call is known to be valid, before anything runs or is stored (a call
    // that becomes a task later is charged for its task then).
    let charge =
        tasks::call_charge(tool.descriptor().upstream.as_deref(), as_task.is_some() || tool.descriptor().background);
    state.limits.admit(&cx.principal, charge).await?;
    let arguments = Value::Object(params.arguments.take().unwrap_or_default());
    let mode = if as_task.is_some() { Mode::BeforeTask } else { Mode::Now };
    let target = Target::new(cx, &params.name, &arguments, mode)?;
    let mut round = Round::resume(state, cx, target, params.request_state.as_deref(), params.input_responses.as_ref())?;
    let call = round.tool_call(arguments);
    if let Some(ttl) = as_task {
        // Refused now, not by a worker later: a task is only created for a call that can run.
        // Arguments the tool refuses are answered as its result with `isError` (SEP-1303) and
        // no task is made: 2026-07-28 lets the server answer any call without a task. A
        // 2025-11-25 client that augmented the call is owed a `CreateTaskResult`, which a
        // plain result is not (its SDK would fail to parse it): there they stay -32602.
        let verdict = tool.check(&call.arguments);
        if cx.era == Era::Legacy {
            verdict?;
        } else if let Some(refused) = refuse(cx, verdict)? {
            return Ok(ToolPlan::Ask(refused));
        }
        round.commit(state).await?;
        // What the tool must know before it can start is asked now, while the call is still
        // synchronous (2026-07-28); a 2025-11-25 task asks from inside, as input_required.
        if cx.era == Era::Modern {
            match tool.preflight(&call, &cx.capabilities) {
                Outcome::Complete(()) => {}
                Outcome::NeedInput { requests, state: continuation } => {
                    return ask(state, cx, &round, requests, continuation).map(ToolPlan::Ask);
                }
                Outcome::Failed(Failure::InvalidArguments(message)) => {
                    return render::complete(cx, CallToolResult::error(message)).map(ToolPlan::Ask);
                }
                Outcome::Failed(failure) => return Err(failure.into()),
            }
        }
        let ToolCall { arguments, input_responses, state: continuation } = call;
        return Ok(ToolPlan::Task(TaskPlan {
            tool: params.name,
            arguments,
            ttl,
            answers: input_responses,
            state: continuation,
            keeps_credential: state.tasks.keeps_credential(tool.descriptor()),
        }));
    }
    // A background tool called by a client that asked for no task: a task all the same,
    // answered at once with how to follow it (see `mcp::companions`).
    if tool.descriptor().background {
        if let Some(refused) = refuse(cx, tool.check(&call.arguments))? {
            return Ok(ToolPlan::Ask(refused));
        }
        if let Some(busy) = background::refuse_when_busy(state, cx, &params.name) {
            return busy.map(ToolPlan::Ask);
        }
        round.commit(state).await?;
        let ToolCall { arguments, input_responses, state: continuation } = call;
        let plan = TaskPlan {
            tool: params.name,
            arguments,
            ttl: TtlRequest::Default,
            answers: input_responses,
            state: continuation,
            keeps_credential: state.tasks.keeps_credential(tool.descriptor()),
        };
        return background::start(state, cx, plan).await.map(ToolPlan::Ask);
    }
    round.commit(state).await?;
    let tool = tool.clone();
    // A 2026-07-28 client that can take a task gets one if an `Auto` call runs long.
    if let TaskPolicy::Auto { after } = tool.descriptor().task_policy
        && cx.era == Era::Modern
        && cx.capabilities.has_extension(TASKS_EXTENSION)
    {
        return Ok(ToolPlan::Run(super::promote::prepare(state, cx, round, tool, params.name, call, after)));
    }
    if cx.era == Era::Legacy {
        return Ok(ToolPlan::Run(super::legacy_input::prepare(state, cx, round, tool, params.name, call)));
    }
    Ok(ToolPlan::Run(super::invoke::prepare_call(state, cx, round, tool, call)))
}

/// A tool's verdict on arguments before anything runs: `None` when it accepts them, the
/// rendered result with `isError: true` when it refuses them (SEP-1303), any other failure as
/// the protocol error it is.
fn refuse(cx: &CallContext, verdict: Result<(), Failure>) -> Result<Option<Bytes>, GatewayError> {
    match verdict {
        Ok(()) => Ok(None),
        Err(Failure::InvalidArguments(message)) => render::complete(cx, CallToolResult::error(message)).map(Some),
        Err(failure) => Err(failure.into()),
    }
}

/// `Some(lifetime)` when the call becomes a task.
fn task_decision(
    cx: &CallContext,
    params: &CallToolParams,
    policy: TaskPolicy,
) -> Result<Option<TtlRequest>, GatewayError> {
    match cx.era {
        // A legacy `task` member is an unknown field here and is ignored.
        Era::Modern => {
            let declared = cx.capabilities.has_extension(TASKS_EXTENSION);
            match policy {
                TaskPolicy::Required if !declared => Err(GatewayError::MissingCapability {
                    message: format!(
                        "Tool {} runs only as a task: declare the io.modelcontextprotocol/tasks extension",
                        params.name
                    ),
                    required: Box::new(ClientCapabilities::only_extension(TASKS_EXTENSION)),
                }),
                TaskPolicy::Optional | TaskPolicy::Required if declared => Ok(Some(TtlRequest::Default)),
                // Auto starts synchronously; the gateway promotes a call that runs long.
                _ => Ok(None),
            }
        }
        Era::Legacy => {
            let requested = match &params.task {
                Some(task) if cx.version.has_core_tasks() => Some(TtlRequest::from_legacy(task)?),
                _ => None,
            };
            match (policy, requested) {
                (TaskPolicy::Forbidden, Some(_)) => Err(GatewayError::TaskSupport {
                    detail: format!("Tool {} does not support task-augmented calls", params.name),
                }),
                (TaskPolicy::Required, None) => Err(GatewayError::TaskSupport {
                    detail: format!("Tool {} must be called as a task (params.task)", params.name),
                }),
                (_, requested) => Ok(requested),
            }
        }
    }
}
