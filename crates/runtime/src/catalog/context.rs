//! What a tool, prompt or resource sees of the request it serves: the caller, the client's
//! declared capabilities, a progress reporter, a logger, a cancellation token, and a way to
//! tell every listening client that a list (or a resource) changed.
//!
//! Invariant: notifications go out only when the request opted in (a `progressToken` for
//! progress, a `logLevel` at or below the message's level for logs) and only on that
//! request's own stream; inside a task, progress becomes the task's status message instead.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::{CancellationToken, WaitForCancellationFuture};

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::jsonrpc::OutgoingNotification;
use mcpgate_protocol::meta::{LoggingLevel, ProgressParams, ProgressToken};
use mcpgate_protocol::method::notification;

use mcpgate_protocol::input::{InputRequests, InputResponse, InputResponses};
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::{
    AnyStore, Change, EventBus as _, Lease, RawAnswer, RawRequests, Read, Renewal, StatusNote, TaskEvent, TaskRecord,
    TaskStore as _,
};

use crate::catalog::Failure;
use crate::catalog::hand_off::HandOff;
use crate::principal::Principal;

/// Repeats of an input request held in place that too few Redis replicas confirmed, before
/// asking for input fails as "the task store is unavailable".
const HOLD_TRIES: u32 = 3;

/// One message on a request's response stream.
#[derive(Debug)]
pub enum Frame {
    /// A notification (progress, log); more frames follow.
    Notification(Bytes),
    /// The response; the stream ends after it.
    Final(Bytes),
}

/// Where a request's notifications go (its response stream), if it has one.
#[derive(Debug, Clone, Default)]
pub struct Notifier {
    sink: Option<mpsc::Sender<Frame>>,
}

impl Notifier {
    /// A notifier writing to a response stream.
    pub fn new(sink: mpsc::Sender<Frame>) -> Self {
        Self { sink: Some(sink) }
    }

    /// Whether this request has a response stream (SSE) to write to.
    pub fn is_streaming(&self) -> bool {
        self.sink.as_ref().is_some_and(|s| !s.is_closed())
    }

    /// Sends a message that must arrive (a server→client request of a legacy stream),
    /// waiting for room; false when there is no stream or the client left.
    pub async fn send_message(&self, message: Bytes) -> bool {
        match &self.sink {
            Some(sink) => sink.send(Frame::Notification(message)).await.is_ok(),
            None => false,
        }
    }

    /// Queues a notification without waiting: progress and logs are advisory, so when a
    /// client reads slower than the tool reports, notifications are dropped rather than
    /// stalling the tool (a closed stream means the client left; cancellation handles that).
    fn send<P: serde::Serialize>(&self, method: &str, params: &P) {
        let Some(sink) = &self.sink else { return };
        match serde_json::to_vec(&OutgoingNotification::new(method, params)) {
            Ok(bytes) => {
                if let Err(mpsc::error::TrySendError::Full(_)) = sink.try_send(Frame::Notification(Bytes::from(bytes)))
                {
                    tracing::debug!(method, "client reads slowly; notification dropped");
                }
            }
            Err(e) => tracing::warn!(error = &e as &dyn std::error::Error, method, "notification not serializable"),
        }
    }
}

/// Where progress goes.
#[derive(Debug, Clone)]
enum Reporter {
    /// A request: notifications on its stream, when it opted in.
    Request { notifier: Notifier, progress_token: Option<ProgressToken>, log_level: Option<LoggingLevel> },
    /// A task: the latest progress message becomes its status message (the worker writes it
    /// to the store at its own pace, so a chatty tool costs no extra round trips).
    Task { status: watch::Sender<Option<StatusNote>> },
}

/// The context of one invocation.
#[derive(Debug, Clone)]
pub struct ToolContext {
    principal: Principal,
    capabilities: Arc<ClientCapabilities>,
    reporter: Reporter,
    /// Where progress also goes as a status message (a call that may become a task).
    status: Option<watch::Sender<Option<StatusNote>>>,
    cancel: CancellationToken,
    /// Where catalog changes are announced (every replica's listen streams), if anywhere.
    changes: Option<AnyStore>,
    /// Where a task's run records its checkpoints (none outside tasks).
    checkpoints: Option<Checkpoints>,
    /// How a synchronous call may move to another replica at a checkpoint (load shedding).
    hand_off: Option<HandOff>,
    /// The virtual server the invocation came through (`None`: the root endpoint): what a
    /// tool that reads tasks may show of them (a server sees only the tasks made through it).
    server: Option<Arc<str>>,
}

/// A task run's way to record its continuation state (see [`ToolContext::checkpoint`]).
#[derive(Debug, Clone)]
pub struct Checkpoints {
    store: AnyStore,
    lease: Lease,
    /// Set once a checkpoint was recorded: the run may then be resumed rather than rerun.
    written: Arc<AtomicBool>,
}

impl Checkpoints {
    /// Checkpoints of the run holding `lease`; `written` is set by the first that is recorded.
    pub fn new(store: AnyStore, lease: Lease, written: Arc<AtomicBool>) -> Self {
        Self { store, lease, written }
    }
}

impl ToolContext {
    /// The context of a request.
    pub fn new(
        principal: Principal,
        capabilities: Arc<ClientCapabilities>,
        progress_token: Option<ProgressToken>,
        log_level: Option<LoggingLevel>,
        notifier: Notifier,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            principal,
            capabilities,
            reporter: Reporter::Request { notifier, progress_token, log_level },
            status: None,
            cancel,
            changes: None,
            checkpoints: None,
            hand_off: None,
            server: None,
        }
    }

    /// The context of a task run by a worker.
    pub fn for_task(
        principal: Principal,
        capabilities: Arc<ClientCapabilities>,
        status: watch::Sender<Option<StatusNote>>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            principal,
            capabilities,
            reporter: Reporter::Task { status },
            status: None,
            cancel,
            changes: None,
            checkpoints: None,
            hand_off: None,
            server: None,
        }
    }

    /// Also turns progress into status messages on `status` (a call that may become a task
    /// while it runs keeps its latest message for the task).
    #[must_use]
    pub fn with_status(mut self, status: watch::Sender<Option<StatusNote>>) -> Self {
        self.status = Some(status);
        self
    }

    /// Announces changes through `store` (see [`ToolContext::announce`]).
    #[must_use]
    pub fn with_changes(mut self, store: AnyStore) -> Self {
        self.changes = Some(store);
        self
    }

    /// Lets the invocation record checkpoints of the task it runs.
    #[must_use]
    pub fn with_checkpoints(mut self, checkpoints: Checkpoints) -> Self {
        self.checkpoints = Some(checkpoints);
        self
    }

    /// Lets a synchronous call be handed to another replica at a checkpoint (see
    /// [`ToolContext::checkpoint`]).
    #[must_use]
    pub fn with_hand_off(mut self, hand_off: HandOff) -> Self {
        self.hand_off = Some(hand_off);
        self
    }

    /// Says which virtual server the invocation came through (`None`: the root).
    #[must_use]
    pub fn with_server(mut self, server: Option<&str>) -> Self {
        self.server = server.map(Arc::from);
        self
    }

    /// The virtual server the invocation came through, `None` at the root endpoint (and in a
    /// task run, the server its task was created through).
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }

    /// Whether this invocation runs a task whose progress it can checkpoint.
    pub fn can_checkpoint(&self) -> bool {
        self.checkpoints.is_some()
    }

    /// Records `state` as the task's continuation: if this run dies, the next run gets it as
    /// its call's `state` and resumes from it (even a tool that is not retry-safe runs again,
    /// as the checkpoint says what it must not redo). False when nothing was recorded (no task
    /// behind this invocation, the task moved on, or the store failed): the tool should then
    /// carry on without relying on it.
    ///
    /// In a synchronous 2026-07-28 call, a checkpoint is where the call may be handed to
    /// another replica when this one is over its load threshold (`http.shed_at_requests`):
    /// this then never returns (the invocation is dropped here) and the client's retry, on
    /// any replica, gets `state` back as the call's state. A tool that checkpoints must
    /// therefore resume from its call's `state` as from a checkpoint.
    pub async fn checkpoint(&self, state: &Value) -> bool {
        if let Some(hand_off) = &self.hand_off {
            if hand_off.offer(state) {
                std::future::pending::<()>().await;
            }
            return false;
        }
        let Some(checkpoints) = &self.checkpoints else { return false };
        let Ok(json) = serde_json::to_string(state) else { return false };
        match checkpoints.store.checkpoint(&checkpoints.lease, &json).await {
            Ok(Renewal::Held) => {
                checkpoints.written.store(true, Ordering::Release);
                true
            }
            Ok(other) => {
                tracing::debug!(?other, "checkpoint not recorded: the task moved on");
                false
            }
            Err(e) => {
                tracing::warn!(error = &e as &dyn std::error::Error, "checkpoint not recorded");
                false
            }
        }
    }

    /// A context with no client behind it (tests, benchmarks).
    pub fn detached(principal: Principal, capabilities: ClientCapabilities) -> Self {
        Self::new(principal, Arc::new(capabilities), None, None, Notifier::default(), CancellationToken::new())
    }

    /// The caller.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// What the client declared for this request.
    pub fn capabilities(&self) -> &ClientCapabilities {
        &self.capabilities
    }

    /// Reports progress: a notification if the request asked for it, or the task's status.
    pub async fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        if let Some(status) = &self.status {
            status.send_replace(Some(status_note(progress, total, message)));
        }
        match &self.reporter {
            Reporter::Request { notifier, progress_token: Some(token), .. } => {
                let params = ProgressParams {
                    progress_token: token.clone(),
                    progress,
                    total,
                    message: message.map(str::to_owned),
                };
                notifier.send(notification::PROGRESS, &params);
            }
            Reporter::Request { .. } => {}
            Reporter::Task { status } => {
                status.send_replace(Some(status_note(progress, total, message)));
            }
        }
    }

    /// Whether progress reports go anywhere (the request asked for them, or they become a
    /// task's status message): a tool that relays progress from elsewhere asks for it only
    /// then.
    pub fn wants_progress(&self) -> bool {
        self.status.is_some()
            || match &self.reporter {
                Reporter::Request { progress_token, .. } => progress_token.is_some(),
                Reporter::Task { .. } => true,
            }
    }

    /// Sends a log message, if the request opted in at this level or a lower one.
    pub async fn log(&self, level: LoggingLevel, data: Value) {
        if let Reporter::Request { notifier, log_level: Some(min), .. } = &self.reporter
            && level >= *min
        {
            let params = json!({ "level": level, "logger": "mcpgate", "data": data });
            notifier.send(notification::MESSAGE, &params);
        }
    }

    /// Resolves when the client goes away or the call is cancelled.
    pub fn cancelled(&self) -> WaitForCancellationFuture<'_> {
        self.cancel.cancelled()
    }

    /// Whether the call has been cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// The call's cancellation token (cancelled when [`ToolContext::cancelled`] resolves), for
    /// work spawned apart from the invocation.
    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Asks the client for input while this run goes on, on this replica (for work that cannot
    /// move mid-way, such as an upstream's request waiting on this replica's connection): the
    /// task shows `input_required` with `requests` (keys unique over the task's life) and this
    /// returns the client's answers once all are in, from whichever replica they reach. Only
    /// inside a task. Fails (and the caller should end the call) when the client cannot answer
    /// them, the task ends or moves on, or no answer comes within `within`: the task then
    /// still shows the requests until its run records an outcome. `continuation`: `None` keeps
    /// the task's state (a checkpoint); `Some(c)` records this round's continuation, so a run
    /// resumed after this one stopped (replica shut down) continues from this round.
    pub async fn ask_in_place(
        &self,
        requests: &InputRequests,
        continuation: Option<Option<&Value>>,
        within: Duration,
    ) -> Result<InputResponses, Failure> {
        let unavailable = |why: String| Failure::Unavailable(why);
        // What the store said is for the log: the failure becomes the task's, which its client reads.
        let store_down = |e: mcpgate_store::StoreError| {
            tracing::warn!(
                error = &e as &dyn std::error::Error,
                "asking for input in place: the task store is unavailable"
            );
            Failure::Unavailable("the task store is unavailable".to_owned())
        };
        let Some(checkpoints) = &self.checkpoints else {
            return Err(unavailable("input can be asked in place only inside a task".to_owned()));
        };
        if requests.is_empty() {
            return Err(Failure::Internal("asked for input but named none".to_owned()));
        }
        if let Some(failure) = super::missing_capabilities(self.capabilities(), requests) {
            return Err(failure);
        }
        let mut raw = RawRequests::new();
        // Text by design: the failure becomes the task's, which its client reads (see `Failure`).
        for (key, request) in requests {
            let json = serde_json::to_string(request).map_err(|e| unavailable(format!("input request: {e}")))?;
            raw.insert(key.clone(), RawAnswer { method: request.method().to_owned(), json });
        }
        let (store, lease) = (&checkpoints.store, &checkpoints.lease);
        let state = match continuation {
            None => None,
            Some(None) => Some(None),
            // Text by design, as for the input requests above.
            Some(Some(value)) => {
                Some(Some(serde_json::to_string(value).map_err(|e| unavailable(format!("continuation: {e}")))?))
            }
        };
        // Subscribed before asking, so the answer's event cannot be missed.
        let mut events = store.subscribe(&lease.task).await.map_err(store_down)?;
        // Too few Redis replicas confirmed the request (`store.replicas_ack`): it may be
        // recorded on the primary only, where a failover would lose it while the client
        // already answers it. A repeat under the same lease answers "held" and waits again.
        let mut tries = 0;
        loop {
            match store.hold(lease, &raw, state.as_ref().map(Option::as_deref)).await {
                Ok(Renewal::Held) => break,
                // A repeat after an unconfirmed try that did land: the client may have seen the
                // requests and answered them meanwhile (the task resumed in place, under this
                // lease), and the repeat then finds it working. Its answers are in the record.
                Ok(Renewal::Lost) if tries > 0 => {
                    return match store.get(&lease.task, Read::Full).await {
                        Ok(Some(record)) => answers_in(&record, requests)
                            .unwrap_or_else(|| Err(unavailable("the task moved on (Lost)".to_owned()))),
                        Ok(None) => Err(unavailable("the task ended".to_owned())),
                        Err(e) => Err(store_down(e)),
                    };
                }
                Ok(other) => return Err(unavailable(format!("the task moved on ({other:?})"))),
                Err(e @ mcpgate_store::StoreError::NotAcknowledged { .. }) if tries < HOLD_TRIES => {
                    tracing::warn!(
                        error = &e as &dyn std::error::Error,
                        "input request not confirmed by the Redis replicas; recording it again"
                    );
                    tries += 1;
                    tokio::time::sleep(Duration::from_millis(100) * tries).await;
                }
                Err(e) => return Err(store_down(e)),
            }
        }
        let deadline = tokio::time::Instant::now() + within;
        loop {
            tokio::select! {
                event = events.next() => match event {
                    TaskEvent::Status(TaskStatus::InputRequired) => continue,
                    TaskEvent::Status(s) if s.is_terminal() => return Err(unavailable("the task ended".to_owned())),
                    TaskEvent::Status(_) | TaskEvent::Resync => {}
                },
                () = tokio::time::sleep_until(deadline) => {
                    return Err(unavailable(format!("no answer to the input request within {} s", within.as_secs())));
                }
                () = self.cancel.cancelled() => return Err(unavailable("cancelled".to_owned())),
            }
            let record = match store.get(&lease.task, Read::Full).await {
                Ok(Some(record)) => record,
                Ok(None) => return Err(unavailable("the task ended".to_owned())),
                Err(e) => {
                    tracing::debug!(
                        error = &e as &dyn std::error::Error,
                        "cannot read a held task; waiting for its next event"
                    );
                    continue;
                }
            };
            if record.status.is_terminal() {
                return Err(unavailable("the task ended".to_owned()));
            }
            if let Some(answered) = answers_in(&record, requests) {
                return answered;
            }
        }
    }

    /// Once [`ToolContext::cancelled`] fired: whether the work was cancelled for good (the
    /// client went away, or the task was cancelled or expired), rather than stopped to be
    /// resumed elsewhere (a task's replica shutting down or losing its lease). Only then should
    /// a tool cancel work it started outside (an upstream task a later run would resume).
    pub async fn cancelled_for_good(&self) -> bool {
        let Some(checkpoints) = &self.checkpoints else { return self.cancel.is_cancelled() };
        match checkpoints.store.get(&checkpoints.lease.task, Read::Control).await {
            Ok(Some(record)) => record.status == TaskStatus::Cancelled,
            Ok(None) => true,
            // Unknown: leave the work running; a later run resumes or the task's lifetime ends it.
            Err(_) => false,
        }
    }

    /// Tells every client listening on any replica that `change` happened (a tool whose
    /// work changes what the server lists, or a resource's contents). Best effort: false when
    /// it could not be announced (no store behind this context, or the store failed).
    pub async fn announce(&self, change: Change) -> bool {
        let Some(store) = &self.changes else { return false };
        match store.publish_change(&change).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(error = &e as &dyn std::error::Error, "could not announce a catalog change");
                false
            }
        }
    }
}

/// The answers to `requests` once the task holding them in place has every one and is
/// working again (`None`: not yet, or not in place); an answer that is no valid result of
/// its request fails the round.
fn answers_in(record: &TaskRecord, requests: &InputRequests) -> Option<Result<InputResponses, Failure>> {
    if record.status != TaskStatus::Working || !requests.keys().all(|k| record.input_responses.contains_key(k)) {
        return None;
    }
    let mut answers = InputResponses::new();
    for key in requests.keys() {
        let Some(answer) = record.input_responses.get(key) else { continue };
        let mut de = serde_json::Deserializer::from_str(&answer.json);
        let Ok(decoded) = InputResponse::decode_for(&answer.method, &mut de) else {
            return Some(Err(Failure::InvalidParams(format!("the answer to {key:?} is not a valid result"))));
        };
        answers.insert(key.clone(), decoded);
    }
    Some(Ok(answers))
}

/// A progress report as a task's status note: the message (or the numbers), and the fraction
/// done when a total says what done is.
fn status_note(progress: f64, total: Option<f64>, message: Option<&str>) -> StatusNote {
    let text = match (message, total) {
        (Some(m), _) => m.to_owned(),
        (None, Some(t)) => format!("{progress} of {t}"),
        (None, None) => format!("{progress}"),
    };
    StatusNote::new(text, total.filter(|t| *t > 0.0).map(|t| progress / t))
}
