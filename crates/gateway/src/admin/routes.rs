//! The admin routes. Listing and purging walk every task with the store's scan (bounded steps
//! per request, resumed with `nextCursor`); inspecting, cancelling and draining touch one task
//! or this replica.
//!
//! ```text
//! GET  /admin/tasks?owner=&issuer=&status=&tool=&upstream=&limit=&cursor=   list (metadata)
//! GET  /admin/tasks/{id}                                                    inspect
//! POST /admin/tasks/{id}/cancel                                             cancel, any owner's
//! POST /admin/tasks/purge   {"status":[…],"owner","issuer","tool","olderThanSecs","cursor"}
//! POST /admin/drain | /admin/undrain,  GET /admin/status            this replica's workers
//! ```

use axum::Json;
use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{
    Cancelled, PurgeFilter, Purged, Read, StoreError, TaskAdmin as _, TaskId, TaskRecord, TaskStore as _,
};

use super::Failed;
use super::view::{detail, page_limit, summary, upstream_of};
use crate::error::GatewayError;
use crate::state::AppState;
use mcpgate_runtime::Principal;

/// Scan steps one request takes at most before it answers with a cursor to go on from.
const MAX_STEPS: usize = 50;

pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/admin/tasks", get(list))
        .route("/admin/tasks/purge", post(purge))
        .route("/admin/tasks/{id}", get(inspect))
        .route("/admin/tasks/{id}/cancel", post(cancel))
        .route("/admin/drain", post(drain))
        .route("/admin/undrain", post(undrain))
        .route("/admin/status", get(status))
}

/// Which tasks a listing or a purge is about.
#[derive(Debug, Default)]
struct Filter {
    /// The owner: the token's subject (of any issuer, unless `issuer` is given), or an owner
    /// key as the store has it.
    owner: Option<String>,
    /// The owner's token issuer.
    issuer: Option<String>,
    /// Statuses, comma-separated.
    status: Option<String>,
    tool: Option<String>,
    upstream: Option<String>,
}

impl Filter {
    fn statuses(&self) -> Result<Option<Vec<TaskStatus>>, GatewayError> {
        self.status.as_deref().map(parse_statuses).transpose()
    }

    fn selects(&self, state: &AppState, task: &TaskRecord, statuses: Option<&[TaskStatus]>) -> bool {
        let named = Principal::parse_key(&task.owner);
        self.owner.as_ref().is_none_or(|o| *o == task.owner || named.is_some_and(|n| n.subject == o))
            && self.issuer.as_ref().is_none_or(|i| named.is_some_and(|n| n.issuer == i))
            && statuses.is_none_or(|s| s.contains(&task.status))
            && self.tool.as_ref().is_none_or(|t| *t == task.tool)
            && self.upstream.as_ref().is_none_or(|u| upstream_of(state, &task.tool).as_ref() == Some(u))
    }
}

fn parse_statuses(list: &str) -> Result<Vec<TaskStatus>, GatewayError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s {
            "working" => Ok(TaskStatus::Working),
            "input_required" => Ok(TaskStatus::InputRequired),
            "completed" => Ok(TaskStatus::Completed),
            "failed" => Ok(TaskStatus::Failed),
            "cancelled" => Ok(TaskStatus::Cancelled),
            other => Err(GatewayError::AdminInvalid {
                detail: format!("unknown status {other:?} (working, input_required, completed, failed, cancelled)"),
            }),
        })
        .collect()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    owner: Option<String>,
    issuer: Option<String>,
    status: Option<String>,
    tool: Option<String>,
    upstream: Option<String>,
    limit: Option<usize>,
    cursor: Option<String>,
}

async fn list(
    State(state): State<AppState>,
    query: Result<Query<ListQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Value>, Failed> {
    // Text by design: the admin client is answered with the rejection as it is.
    let Query(query) = query.map_err(|e| GatewayError::AdminInvalid { detail: e.body_text() })?;
    let limit = page_limit(query.limit)?;
    let filter = Filter {
        owner: query.owner,
        issuer: query.issuer,
        status: query.status,
        tool: query.tool,
        upstream: query.upstream,
    };
    let statuses = filter.statuses()?;
    let mut tasks = Vec::new();
    let mut cursor = query.cursor;
    for _ in 0..MAX_STEPS {
        let page = state.store.scan(cursor.as_deref(), limit).await.map_err(scan_error)?;
        tasks.extend(
            page.tasks.iter().filter(|t| filter.selects(&state, t, statuses.as_deref())).map(|t| summary(&state, t)),
        );
        cursor = page.next;
        if cursor.is_none() || tasks.len() >= limit {
            break;
        }
    }
    Ok(Json(json!({ "tasks": tasks, "nextCursor": cursor })))
}

async fn inspect(State(state): State<AppState>, Path(id): Path<String>) -> Result<Json<Value>, Failed> {
    let task = parse_id(&id)?;
    let payloads = state.config.admin.show_payloads;
    // Without show_payloads nothing sealed is even read.
    let read = if payloads { Read::Full } else { Read::Control };
    let record = state.store.get(&task, read).await?.ok_or(GatewayError::AdminNotFound { id })?;
    tracing::info!(task = %record.id, payloads, "admin: task inspected");
    Ok(Json(detail(&state, &record, payloads)))
}

async fn cancel(State(state): State<AppState>, Path(id): Path<String>) -> Result<(StatusCode, Json<Value>), Failed> {
    let task = parse_id(&id)?;
    let not_found = || GatewayError::AdminNotFound { id: id.clone() };
    let owner = state.store.get(&task, Read::Control).await?.ok_or_else(not_found)?.owner;
    // The owner's own cancel: the task's run hears of it as it would of the client's.
    match state.tasks.cancel(&task, &owner).await? {
        Cancelled::Now(record) => {
            tracing::info!(task = %record.id, owner = %record.owner, "admin: task cancelled");
            Ok((StatusCode::OK, Json(summary(&state, &record))))
        }
        Cancelled::AlreadyTerminal(record) => Ok((
            StatusCode::CONFLICT,
            Json(json!({ "error": format!("task {id} already ended: {}", record.status.as_str()),
                "task": summary(&state, &record) })),
        )),
        Cancelled::NotFound => Err(not_found().into()),
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct PurgeBody {
    /// Terminal statuses to delete (default: all three).
    status: Option<Vec<String>>,
    owner: Option<String>,
    issuer: Option<String>,
    tool: Option<String>,
    upstream: Option<String>,
    /// Only tasks whose last change is at least this old.
    older_than_secs: Option<u64>,
    cursor: Option<String>,
}

async fn purge(State(state): State<AppState>, body: axum::body::Bytes) -> Result<Json<Value>, Failed> {
    // No body: every ended task.
    let body: PurgeBody = if body.is_empty() {
        PurgeBody::default()
    } else {
        // Text by design: the admin client is told what in its body does not decode.
        serde_json::from_slice(&body)
            .map_err(|e| GatewayError::AdminInvalid { detail: format!("invalid purge request: {e}") })?
    };
    let statuses = match &body.status {
        None => vec![TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled],
        Some(list) => parse_statuses(&list.join(","))?,
    };
    if let Some(live) = statuses.iter().find(|s| !s.is_terminal()) {
        return Err(GatewayError::AdminInvalid {
            detail: format!("only ended tasks are purged, not {}", live.as_str()),
        }
        .into());
    }
    let filter = PurgeFilter { statuses, older_than_ms: body.older_than_secs.unwrap_or(0).saturating_mul(1000) };
    let select =
        Filter { owner: body.owner, issuer: body.issuer, status: None, tool: body.tool, upstream: body.upstream };
    let quotas = {
        let l = &state.config.limits;
        l.max_running_tasks > 0 || l.max_retained_tasks > 0 || l.max_stored_bytes > 0
    };
    let (mut purged, mut cursor) = (0u64, body.cursor);
    for _ in 0..MAX_STEPS {
        let page = state.store.scan(cursor.as_deref(), 500).await.map_err(scan_error)?;
        for task in page.tasks.iter().filter(|t| t.status.is_terminal() && select.selects(&state, t, None)) {
            if let Purged::Deleted { issuer, subject } = state.store.purge(&task.id, &filter).await? {
                purged += 1;
                // One line per purge request (below): a purge may delete millions.
                tracing::debug!(task = %task.id, owner = %task.owner, "admin: task purged");
                if quotas {
                    let creator = Principal::new(&issuer, &subject, Vec::new());
                    state.store.forget_quota(creator.caller_key(), &task.id).await?;
                }
            }
        }
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    tracing::info!(purged, more = cursor.is_some(), "admin: tasks purged");
    Ok(Json(json!({ "purged": purged, "nextCursor": cursor })))
}

async fn drain(State(state): State<AppState>) -> Json<Value> {
    state.tasks.workers().drain(true);
    tracing::info!(worker = state.tasks.workers().worker_id(), "admin: replica drained: it claims no more jobs");
    // The fleet sees it at once, not at the next beat.
    crate::heartbeat::beat(&state).await;
    status(State(state)).await
}

async fn undrain(State(state): State<AppState>) -> Json<Value> {
    state.tasks.workers().drain(false);
    tracing::info!(worker = state.tasks.workers().worker_id(), "admin: replica undrained: it claims jobs again");
    crate::heartbeat::beat(&state).await;
    status(State(state)).await
}

async fn status(State(state): State<AppState>) -> Json<Value> {
    Json(json!({
        "worker": state.tasks.workers().worker_id(),
        "draining": state.tasks.workers().is_draining(),
        "running": state.tasks.workers().running(),
        "maxRunning": state.config.tasks.max_running,
        "store": state.store.kind(),
    }))
}

fn parse_id(id: &str) -> Result<TaskId, GatewayError> {
    TaskId::parse(id).ok_or_else(|| GatewayError::AdminNotFound { id: id.to_owned() })
}

/// A scan's failure: a cursor no scan handed out is the caller's mistake.
fn scan_error(e: StoreError) -> GatewayError {
    match e {
        StoreError::InvalidCursor => GatewayError::AdminInvalid { detail: "invalid cursor".to_owned() },
        other => other.into(),
    }
}
