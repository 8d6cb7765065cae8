//! Calls that become tasks while they run (`TaskPolicy::Auto`, for 2026-07-28 requests that
//! declared the tasks extension): the call starts synchronously; still running after the
//! tool's `after`, it becomes a task created already leased to this replica, the client gets
//! `CreateTaskResult` at that moment, and the call goes on behind the task, watched by this
//! replica's workers like any run (lease renewed; cancel, expiry and shutdown obeyed).
//!
//! Invariants: the call runs once, here; if this replica dies, the task's job is reclaimed
//! once the lease lapses and the tool's retry rule decides (run again, or fail saying it was
//! interrupted); if no task can be created (the store is down) or none is admitted (the
//! caller is at a task quota or task rate limit, or every worker slot here is taken: see
//! `crate::tasks`), the call simply stays synchronous, bounded by its request. Progress goes
//! to the request while it is open and to the task's status message.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use mcpgate_runtime::catalog::{Failure, Outcome, Tool, ToolCall};
use mcpgate_runtime::worker::Adopted;

use super::invoke::{finish, tool_context};
use super::task_methods::render_created;
use crate::call_context::CallContext;
use crate::mcp::request_state::Round;
use crate::mcp::work::Prepared;
use crate::state::AppState;
use crate::tasks::{Adoption, TaskPlan, TtlRequest};

/// A call of `tool` that becomes a task if it runs longer than `after`.
pub(super) fn prepare(
    state: &AppState,
    cx: &CallContext,
    round: Round,
    tool: Arc<dyn Tool>,
    name: String,
    call: ToolCall,
    after: Duration,
) -> Prepared {
    let state = state.clone();
    let cx = cx.clone();
    Box::new(move |notifier, request_cancel: CancellationToken| {
        Box::pin(async move {
            // The call's own token: the request's end must not stop it once it is a task.
            let own = CancellationToken::new();
            let (status_tx, status_rx) = watch::channel(None);
            let tcx = tool_context(&state, &cx, notifier, own.clone()).with_status(status_tx);
            let plan = TaskPlan {
                tool: name,
                arguments: call.arguments.clone(),
                ttl: TtlRequest::Default,
                answers: call.input_responses.clone(),
                state: call.state.clone(),
                keeps_credential: state.tasks.keeps_credential(tool.descriptor()),
            };
            let retry_safe = tool.descriptor().retry_safe;
            let upstream = tool.descriptor().upstream.clone();
            let mut running = tokio::spawn(async move { tool.call(call, &tcx).await });
            // Until promoted, the call ends with the request (dropped: the client left).
            let stop_with_request = own.clone().drop_guard();
            let joined = |r: Result<Outcome<_>, tokio::task::JoinError>| {
                r.unwrap_or_else(|e| Outcome::Failed(Failure::Internal(format!("the tool's task ended: {e}"))))
            };
            tokio::select! {
                r = &mut running => return finish(&state, &cx, &round, std::future::ready(joined(r))).await,
                () = request_cancel.cancelled() => {
                    own.cancel();
                    return finish(&state, &cx, &round, async { joined(running.await) }).await;
                }
                () = tokio::time::sleep(after) => {}
            }
            let sent_at = tokio::time::Instant::now();
            match state.tasks.adopt(&cx, upstream.as_deref(), plan).await {
                Ok(Adoption { record, lease, job, slot }) => {
                    let reply = render_created(&cx, &record);
                    let cancel = stop_with_request.disarm();
                    tracing::info!(task = %record.id, after_ms = after.as_millis(), "long call became a task");
                    state.tasks.workers().adopt(
                        slot,
                        Adopted {
                            job,
                            lease,
                            task: record,
                            sent_at,
                            status: status_rx,
                            cancel,
                            retry_safe,
                            // The call runs with its request's context: it records no checkpoints.
                            checkpointed: Arc::default(),
                        },
                        async move { joined(running.await) },
                    );
                    reply
                }
                Err(e) => {
                    if e.is_server_fault() {
                        tracing::warn!(
                            error = &e as &dyn std::error::Error,
                            "a long call could not become a task; it stays synchronous"
                        );
                    } else {
                        // Refused by the caller's quotas or limits, or no free worker here.
                        tracing::debug!(
                            error = &e as &dyn std::error::Error,
                            "a long call was not admitted as a task; it stays synchronous"
                        );
                    }
                    let outcome = async {
                        tokio::select! {
                            r = &mut running => joined(r),
                            () = request_cancel.cancelled() => {
                                own.cancel();
                                joined(running.await)
                            }
                        }
                    };
                    finish(&state, &cx, &round, outcome).await
                }
            }
        })
    })
}
