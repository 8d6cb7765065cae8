//! Long-lived notification streams: `subscriptions/listen` (2026-07-28, SEP-2575) and a
//! 2025-11-25 session's GET stream. Each carries what its client asked for: list changes of
//! the merged catalog (from any replica, through the store's change channel) and, on a listen
//! stream, `notifications/tasks` for the caller's own tasks (through the tasks' event channels).
//!
//! Invariants: a listen stream's first message is the acknowledgement naming exactly what will
//! be sent, and every message carries the listen request's id as its subscription id; nothing
//! the client did not ask for is sent; a task id is watched only when it is the caller's own
//! (others' and unknown ids are left out of the acknowledgement, indistinguishably); a stream
//! holds a listener slot (not a request slot) and gives it back when it ends; when the replica
//! begins shutting down, a listen stream ends with its closing result.

use axum::http::HeaderMap;
use axum::response::Response;
use bytes::Bytes;
use futures_util::StreamExt as _;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, mpsc};

use mcpgate_protocol::RequestId;
use mcpgate_protocol::capabilities::{ClientCapabilities, TASKS_EXTENSION};
use mcpgate_protocol::subscription::{ListenParams, SUBSCRIPTION_ID_KEY, SubscriptionFilter, notification};
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{Change, EventBus as _, Read, Subscription, TaskEvent, TaskId, TaskStore as _};

use super::task_view;
use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::http::headers::MCP_PROTOCOL_VERSION;
use crate::http::negotiate::Accept;
use crate::http::reply::{self, Frame};
use crate::principal_slots::PrincipalSlot;
use crate::state::AppState;
use mcpgate_runtime::Principal;

/// Task ids one listen stream may watch.
pub(crate) const MAX_TASK_IDS: usize = 100;

/// Messages queued for a slow client before the stream waits for it.
const QUEUE: usize = 64;

/// What a stream carries, and how its messages are tagged.
struct Feed {
    tools: bool,
    prompts: bool,
    resources: bool,
    /// The listen request's id (modern); `None` on a legacy GET stream.
    subscription: Option<RequestId>,
}

/// Opens a `subscriptions/listen` stream.
pub(super) async fn open(
    state: &AppState,
    cx: &CallContext,
    params: ListenParams,
    accept: Accept,
) -> Result<Response, GatewayError> {
    if !accept.sse {
        return Err(GatewayError::NotAcceptable);
    }
    let asked = params.notifications;
    let task_ids = asked.task_ids.unwrap_or_default();
    if !task_ids.is_empty() && !cx.capabilities.has_extension(TASKS_EXTENSION) {
        return Err(GatewayError::MissingCapability {
            message: "task notifications require the io.modelcontextprotocol/tasks extension in clientCapabilities"
                .to_owned(),
            required: Box::new(ClientCapabilities::only_extension(TASKS_EXTENSION)),
        });
    }
    if task_ids.len() > MAX_TASK_IDS {
        return Err(GatewayError::InvalidParams {
            detail: format!("at most {MAX_TASK_IDS} taskIds per listen stream, got {}", task_ids.len()),
        });
    }
    let slot = state.listeners.acquire(cx.principal.key())?;
    let (tools, prompts, resources) = cx.endpoint.has(&state.catalog.load());
    let feed = Feed {
        tools: tools && asked.tools_list_changed == Some(true),
        prompts: prompts && asked.prompts_list_changed == Some(true),
        resources: resources && asked.resources_list_changed == Some(true),
        subscription: Some(cx.id.clone()),
    };
    // Subscribed before anything is read, so no change after this point is missed.
    let changes = state.store.changes();
    let watched = watch_tasks(state, cx, &task_ids).await?;
    let accepted = SubscriptionFilter {
        tools_list_changed: feed.tools.then_some(true),
        prompts_list_changed: feed.prompts.then_some(true),
        resources_list_changed: feed.resources.then_some(true),
        resource_subscriptions: None,
        task_ids: (!task_ids.is_empty()).then(|| watched.iter().map(|(id, _)| id.to_string()).collect()),
    };
    let ack = feed.message(notification::ACKNOWLEDGED, json_object(json!({ "notifications": accepted })));
    tracing::debug!(
        tools = feed.tools,
        prompts = feed.prompts,
        resources = feed.resources,
        tasks = watched.len(),
        "listen stream opened"
    );
    Ok(spawn(state, feed, slot, changes, watched, Some(ack)))
}

/// Opens a 2025-11-25 session's GET stream: the list changes this server announces. The
/// request must carry a session of this principal (and its version, when it names one).
pub(crate) fn open_legacy(
    state: &AppState,
    endpoint: &crate::servers::Endpoint,
    headers: &HeaderMap,
    principal: &Principal,
) -> Result<Response, GatewayError> {
    let version = headers.get(MCP_PROTOCOL_VERSION).map(|v| v.to_str().unwrap_or_default());
    super::admission::admit_legacy(state, endpoint, headers, principal, version)?;
    let slot = state.listeners.acquire(principal.key())?;
    let (tools, prompts, resources) = endpoint.has(&state.catalog.load());
    let feed = Feed { tools, prompts, resources, subscription: None };
    Ok(spawn(state, feed, slot, state.store.changes(), Vec::new(), None))
}

/// The caller's own tasks among `ids`, each with a live subscription to its events.
async fn watch_tasks(
    state: &AppState,
    cx: &CallContext,
    ids: &[String],
) -> Result<Vec<(TaskId, Subscription)>, GatewayError> {
    let mut watched = Vec::with_capacity(ids.len());
    for raw in ids {
        let Some(id) = TaskId::parse(raw) else { continue };
        if watched.iter().any(|(w, _)| *w == id) {
            continue;
        }
        // Subscribe first, then check: a transition between the two is still delivered.
        let subscription = state.store.subscribe(&id).await?;
        let found = state.tasks.find(&id, cx.principal.key(), Read::Control).await?;
        if found.is_some_and(|record| cx.endpoint.sees_task(&record)) {
            watched.push((id, subscription));
        }
    }
    Ok(watched)
}

type TaskWait = BoxFuture<'static, (TaskId, Subscription, TaskEvent)>;

fn next_event(id: TaskId, mut subscription: Subscription) -> TaskWait {
    Box::pin(async move {
        let event = subscription.next().await;
        (id, subscription, event)
    })
}

/// Starts the stream's task; returns the SSE response it feeds.
fn spawn(
    state: &AppState,
    feed: Feed,
    slot: PrincipalSlot,
    mut changes: broadcast::Receiver<Change>,
    watched: Vec<(TaskId, Subscription)>,
    first: Option<Bytes>,
) -> Response {
    let (tx, rx) = mpsc::channel::<Frame>(QUEUE);
    let closed = state.shutdown.child_token();
    let guard = closed.clone().drop_guard();
    let tracker = state.in_flight.clone();
    let keepalive = state.sse_keepalive();
    let state = state.clone();
    let task = async move {
        let _slot = slot;
        if let Some(ack) = first
            && tx.send(Frame::Notification(ack)).await.is_err()
        {
            return;
        }
        let mut tasks: FuturesUnordered<TaskWait> =
            watched.into_iter().map(|(id, subscription)| next_event(id, subscription)).collect();
        let mut last_seen: Vec<(TaskId, TaskStatus, u64)> = Vec::new();
        loop {
            let messages = tokio::select! {
                () = closed.cancelled() => return,
                () = state.stopping.cancelled() => {
                    if let Some(id) = &feed.subscription {
                        let result = json!({ "resultType": "complete", "_meta": { SUBSCRIPTION_ID_KEY: id } });
                        let result = serde_json::to_vec(&result).unwrap_or_default();
                        let _ = tokio::time::timeout(
                            std::time::Duration::from_secs(5),
                            tx.send(Frame::Final(reply::result_envelope(id, &result))),
                        )
                        .await;
                    }
                    return;
                }
                change = changes.recv() => match change {
                    Ok(change) => feed.on_change(&change),
                    Err(broadcast::error::RecvError::Lagged(_)) => feed.on_change(&Change::Missed),
                    Err(broadcast::error::RecvError::Closed) => return,
                },
                Some((id, subscription, event)) = tasks.next(), if !tasks.is_empty() => {
                    let (message, terminal) = task_message(&state, &feed, &id, event, &mut last_seen).await;
                    if !terminal {
                        tasks.push(next_event(id, subscription));
                    }
                    message.into_iter().collect()
                }
            };
            for message in messages {
                if tx.send(Frame::Notification(message)).await.is_err() {
                    return;
                }
            }
        }
    };
    tracker.spawn(tracing::Instrument::in_current_span(task));
    reply::sse(rx, None, guard, keepalive)
}

/// The `notifications/tasks` message for a task's event (none when nothing changed since the
/// last one, or the task is gone), and whether the task is finished (no more events to watch).
async fn task_message(
    state: &AppState,
    feed: &Feed,
    id: &TaskId,
    _event: TaskEvent,
    last_seen: &mut Vec<(TaskId, TaskStatus, u64)>,
) -> (Option<Bytes>, bool) {
    let record = match state.store.get(id, Read::WithOutcome).await {
        Ok(Some(record)) => record,
        Ok(None) => return (None, true),
        Err(e) => {
            tracing::debug!(task = %id, error = &e as &dyn std::error::Error, "cannot read a watched task; its next event retries");
            return (None, false);
        }
    };
    let terminal = record.status.is_terminal();
    let seen = (record.status, record.updated_ms);
    match last_seen.iter_mut().find(|(t, _, _)| t == id) {
        Some(entry) if (entry.1, entry.2) == seen => return (None, terminal),
        Some(entry) => (entry.1, entry.2) = seen,
        None => last_seen.push((id.clone(), seen.0, seen.1)),
    }
    let view = match task_view::detailed(&record) {
        Ok(view) => view,
        Err(e) => {
            tracing::warn!(task = %id, error = &e as &dyn std::error::Error, "watched task not renderable");
            return (None, terminal);
        }
    };
    let params = json_object(serde_json::to_value(view).unwrap_or(Value::Null));
    (Some(feed.message(notification::TASKS, params)), terminal)
}

impl Feed {
    /// The messages a catalog change makes on this stream.
    fn on_change(&self, change: &Change) -> Vec<Bytes> {
        let mut out = Vec::new();
        let mut push = |wanted: bool, method: &str| {
            if wanted {
                out.push(self.message(method, Map::new()));
            }
        };
        match change {
            Change::ToolsListChanged => push(self.tools, notification::TOOLS_LIST_CHANGED),
            Change::PromptsListChanged => push(self.prompts, notification::PROMPTS_LIST_CHANGED),
            Change::ResourcesListChanged => push(self.resources, notification::RESOURCES_LIST_CHANGED),
            // No resource subscriptions are accepted (none is acknowledged), so none is sent.
            Change::ResourceUpdated(_) => {}
            Change::Missed => {
                push(self.tools, notification::TOOLS_LIST_CHANGED);
                push(self.prompts, notification::PROMPTS_LIST_CHANGED);
                push(self.resources, notification::RESOURCES_LIST_CHANGED);
            }
        }
        out
    }

    /// A notification with `params`, tagged with the subscription id on a listen stream.
    fn message(&self, method: &str, mut params: Map<String, Value>) -> Bytes {
        if let Some(id) = &self.subscription {
            let meta = params.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(SUBSCRIPTION_ID_KEY.to_owned(), serde_json::to_value(id).unwrap_or(Value::Null));
            }
        }
        let mut message = json!({ "jsonrpc": "2.0", "method": method });
        if !params.is_empty() {
            message["params"] = Value::Object(params);
        }
        serde_json::to_vec(&message).map(Bytes::from).unwrap_or_default()
    }
}

fn json_object(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(subscription: Option<RequestId>) -> Feed {
        Feed { tools: true, prompts: false, resources: true, subscription }
    }

    #[test]
    fn only_what_was_asked_is_sent_tagged_with_the_listen_id() {
        let feed = feed(Some(RequestId::Number(7)));
        assert!(feed.on_change(&Change::PromptsListChanged).is_empty(), "prompts were not asked for");
        let sent = feed.on_change(&Change::ToolsListChanged);
        let message: Value = serde_json::from_slice(&sent[0]).expect("json");
        assert_eq!(message["method"], "notifications/tools/list_changed");
        assert_eq!(message["params"]["_meta"][SUBSCRIPTION_ID_KEY], 7);
        let missed: Vec<Value> =
            feed.on_change(&Change::Missed).iter().map(|m| serde_json::from_slice(m).expect("json")).collect();
        let methods: Vec<&str> = missed.iter().filter_map(|m| m["method"].as_str()).collect();
        assert_eq!(methods, ["notifications/tools/list_changed", "notifications/resources/list_changed"]);
    }

    #[test]
    fn a_legacy_stream_sends_bare_notifications() {
        let sent = feed(None).on_change(&Change::ResourcesListChanged);
        assert_eq!(&sent[0][..], br#"{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}"#);
    }
}
