//! The data the store keeps and hands out: task ids, task records, jobs, leases, and the
//! outcomes of each transition.
//!
//! Invariants: a task id carries 128 random bits and the shard its keys live in; a record's
//! `status` only moves along working ⇄ input_required → completed | failed | cancelled, and a
//! terminal status never changes.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngExt as _;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;

/// Length of a task id: `t` + 2 hex digits of shard + `-` + 22 base64url characters.
const ID_LEN: usize = 26;

/// A task id: unguessable (128 random bits) and naming its shard, so every key of the task
/// can be derived from the id alone.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TaskId(String);

impl TaskId {
    /// A fresh random id in `shard`.
    pub fn generate(shard: u8) -> Self {
        let random: [u8; 16] = rand::rng().random();
        let mut id = String::with_capacity(ID_LEN);
        id.push('t');
        id.push_str(&format!("{shard:02x}"));
        id.push('-');
        URL_SAFE_NO_PAD.encode_string(random, &mut id);
        Self(id)
    }

    /// An id derived from 16 bytes (a digest), in shard 0: names an event channel that is not a
    /// task's (e.g. the cancellation of one in-flight request), so it can use the event bus.
    pub fn derived(bytes: [u8; 16]) -> Self {
        let mut id = String::with_capacity(ID_LEN);
        id.push_str("t00-");
        URL_SAFE_NO_PAD.encode_string(bytes, &mut id);
        Self(id)
    }

    /// Parses an id a client presented; `None` unless it has exactly the shape of one.
    pub fn parse(s: &str) -> Option<Self> {
        let b = s.as_bytes();
        let well_formed = b.len() == ID_LEN
            && b[0] == b't'
            && b[1..3].iter().all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
            && b[3] == b'-'
            && URL_SAFE_NO_PAD.decode(&b[4..]).is_ok_and(|raw| raw.len() == 16);
        well_formed.then(|| Self(s.to_owned()))
    }

    /// The shard whose keys hold this task.
    pub fn shard(&self) -> u8 {
        u8::from_str_radix(&self.0[1..3], 16).unwrap_or(0)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

/// A task to create.
#[derive(Debug, Clone)]
pub struct NewTask {
    /// Owner key of the principal (see `Principal::key`).
    pub owner: String,
    /// Issuer of the principal (to act as them when the task runs).
    pub issuer: String,
    /// Subject of the principal.
    pub subject: String,
    /// Era of the request that created it.
    pub era: Era,
    /// Tool to run.
    pub tool: String,
    /// Arguments, a JSON object.
    pub arguments: String,
    /// The client's capabilities, a JSON object.
    pub capabilities: String,
    /// Lifetime from creation; `None` = unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested poll interval.
    pub poll_interval_ms: u64,
    /// The scopes the principal was granted, so the task runs with the authority its creator
    /// had.
    pub scopes: Vec<String>,
    /// When set, a repeat of this call within the window returns the task it created; `None`
    /// creates a new task every time.
    pub idempotency: Option<Idempotency>,
    /// Answers gathered before the task was created (multi-round input that had to finish
    /// first), passed to the tool's first run.
    pub input_responses: RawAnswers,
    /// Continuation state from those rounds, for the tool's first run.
    pub state: Option<String>,
    /// The caller's bearer token, for a tool whose upstream exchanges it on every call (RFC
    /// 8693): a run on any replica acts for the caller with it. Stored sealed, whatever
    /// `store.encrypt_at_rest` says; `None` for every other tool.
    pub credential: Option<String>,
    /// The W3C `traceparent` of the request that created the task, so the spans of its runs
    /// link to it on whichever replica they run.
    pub trace: Option<String>,
    /// The longest lifetime any task of the deployment can have (`None` when unlimited
    /// lifetimes are allowed): owner-index entries older than this are pruned on create.
    pub index_horizon_ms: Option<u64>,
    /// Whether `list` finds the task (it is indexed under its owner): only a deployment that
    /// serves `tasks/list` needs it, and the index costs commands on every create.
    pub indexed: bool,
    /// The creator's quotas, if any apply: a creation over one fails with
    /// `StoreError::QuotaExceeded` and creates nothing.
    pub quota: Option<crate::quota::Quota>,
    /// The virtual server the task was created through (`None`: the root endpoint); it is
    /// read through that server or the root only.
    pub server: Option<String>,
}

impl NewTask {
    /// The bytes this task holds when created, as a bytes quota counts them: its arguments,
    /// its continuation state and the answers gathered before it.
    pub fn payload_bytes(&self) -> u64 {
        let answers: usize = self.input_responses.values().map(|a| a.json.len()).sum();
        (self.arguments.len() + self.state.as_ref().map_or(0, String::len) + answers) as u64
    }

    /// The record this task starts as, once created as `id` at `created_ms` (store clock):
    /// working, never run, nothing asked yet.
    pub fn into_record(self, id: TaskId, created_ms: u64) -> TaskRecord {
        TaskRecord {
            id,
            owner: self.owner,
            issuer: self.issuer,
            subject: self.subject,
            era: self.era,
            tool: self.tool,
            arguments: self.arguments,
            capabilities: self.capabilities,
            scopes: self.scopes,
            status: TaskStatus::Working,
            status_message: None,
            progress_ppm: None,
            created_ms,
            updated_ms: created_ms,
            ttl_ms: self.ttl_ms,
            poll_interval_ms: self.poll_interval_ms,
            outcome: None,
            tool_error: false,
            attempts: 0,
            resumable: false,
            input_requests: RawByKey::new(),
            state: self.state,
            input_responses: self.input_responses,
            credential: self.credential,
            trace: self.trace,
            server: self.server,
        }
    }
}

/// What makes two creations the same call: the first one's task is returned for the second.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Idempotency {
    /// Digest of who asked and under which key (2025-11-25: principal, session, request id,
    /// tool and arguments; 2026-07-28: principal and `Idempotency-Key`); it picks the shard.
    pub scope: [u8; 32],
    /// Digest of the call itself (tool and arguments): a scope reused for another call is
    /// refused ([`Created::KeyReused`]), never answered with the first call's task.
    pub call: [u8; 32],
    /// How long a repeat is recognised.
    pub window_ms: u64,
}

/// How much of a task a read fetches: reads on the request path never fetch what they do not
/// render (a task's arguments may be megabytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Read {
    /// Status, message, timestamps, lifetime, poll interval, owner, era, tool, whether a
    /// result is a tool error, and the outstanding input requests of a parked task; the rest
    /// (`arguments`, `capabilities`, `scopes`, `state`, `input_responses`, `outcome`, and
    /// `issuer`, `subject` and `attempts`) may be left empty.
    Control,
    /// [`Read::Control`] plus the outcome (result or error).
    WithOutcome,
    /// Everything.
    Full,
}

/// How a task ended (or what a failed task carries), as raw JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskOutcome {
    /// The method's result (e.g. a `CallToolResult`, possibly with `isError: true`).
    Result(String),
    /// A JSON-RPC error object.
    Error(String),
}

/// What a running tool last said about itself: a message and, when it knows, how much is done.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StatusNote {
    /// The status message.
    pub message: String,
    /// Fraction done, in millionths (0 to 1,000,000).
    pub progress_ppm: Option<u32>,
}

impl StatusNote {
    /// A note of `message` and `fraction` done (0 to 1; clamped; not finite = unknown).
    pub fn new(message: impl Into<String>, fraction: Option<f64>) -> Self {
        let progress_ppm = fraction.filter(|f| f.is_finite()).map(|f| {
            // Clamped to 0..=1 first, so the product fits a u32 exactly.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let ppm = (f.clamp(0.0, 1.0) * PPM).round() as u32;
            ppm
        });
        Self { message: message.into(), progress_ppm }
    }

    /// A message alone.
    pub fn text(message: impl Into<String>) -> Self {
        Self { message: message.into(), progress_ppm: None }
    }
}

/// Millionths in one.
const PPM: f64 = 1_000_000.0;

/// A task as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRecord {
    /// Id.
    pub id: TaskId,
    /// Owner key.
    pub owner: String,
    /// Principal issuer.
    pub issuer: String,
    /// Principal subject.
    pub subject: String,
    /// Creating era.
    pub era: Era,
    /// Tool.
    pub tool: String,
    /// Arguments (JSON object).
    pub arguments: String,
    /// Client capabilities (JSON object).
    pub capabilities: String,
    /// Scopes of the principal that created it.
    pub scopes: Vec<String>,
    /// Status.
    pub status: TaskStatus,
    /// Human-readable status.
    pub status_message: Option<String>,
    /// How much of the work is done, in millionths, as its tool last reported (while running).
    pub progress_ppm: Option<u32>,
    /// Creation time (Unix ms, store clock).
    pub created_ms: u64,
    /// Last change (Unix ms, store clock).
    pub updated_ms: u64,
    /// Lifetime; `None` = unlimited.
    pub ttl_ms: Option<u64>,
    /// Suggested poll interval.
    pub poll_interval_ms: u64,
    /// Outcome once terminal.
    pub outcome: Option<TaskOutcome>,
    /// The outcome is a tool result with `isError: true` (recorded at finish, so a reader of
    /// the status alone need not fetch the result).
    pub tool_error: bool,
    /// Executions started so far.
    pub attempts: u32,
    /// The state is a checkpoint of a run (see `TaskStore::checkpoint`): a new run resumes
    /// from it rather than starting the work again.
    pub resumable: bool,
    /// Outstanding input requests by key (each raw JSON), while `input_required`.
    pub input_requests: RawByKey,
    /// The tool's continuation state (JSON), while waiting for input.
    pub state: Option<String>,
    /// Answers collected so far, over every round, by key.
    pub input_responses: RawAnswers,
    /// The caller's bearer token (see [`NewTask::credential`]); read by [`Read::Full`] only.
    pub credential: Option<String>,
    /// The creating request's `traceparent` (see [`NewTask::trace`]); read by [`Read::Full`]
    /// only.
    pub trace: Option<String>,
    /// The virtual server it was created through (see [`NewTask::server`]); read by every
    /// read.
    pub server: Option<String>,
}

impl TaskRecord {
    /// How much of the work is done (0 to 1), as its tool last reported.
    pub fn progress(&self) -> Option<f64> {
        self.progress_ppm.map(|p| f64::from(p) / PPM)
    }
}

/// JSON values by key, kept raw: the store never re-encodes what tools and clients wrote.
pub type RawByKey = std::collections::BTreeMap<String, String>;

/// An answer to an input request: the method it answers and the answer's JSON (raw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawAnswer {
    /// The method of the request it answers (`elicitation/create`, ...), so it is decoded as
    /// that method's result and nothing else.
    pub method: String,
    /// The answer.
    pub json: String,
}

/// Answers by the key of the request they answer.
pub type RawAnswers = std::collections::BTreeMap<String, RawAnswer>;

/// Input requests by key, each with the method it asks (stored beside it so an answer is
/// checked against it without decoding the request inside the store).
pub type RawRequests = std::collections::BTreeMap<String, RawAnswer>;

/// An answer as the store records it: checked by the gateway (it decoded, and is not too
/// large), together with every method it is a valid result of; the store records it only
/// if the request under its key asks one of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedAnswer {
    /// Methods the answer is a valid result of (`elicitation/create`, ...).
    pub fits: Vec<&'static str>,
    /// The answer's JSON, as received.
    pub json: String,
}

/// Checked answers by the key of the request they answer.
pub type CheckedAnswers = std::collections::BTreeMap<String, CheckedAnswer>;

/// Result of `TaskStore::answer`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answered {
    /// Unknown, expired, or another owner's task.
    NotFound,
    /// The task waits for no input (any status but `input_required`); nothing was recorded.
    NotWaiting(mcpgate_protocol::task::TaskStatus),
    /// The answer under this outstanding key does not fit its request; nothing was recorded.
    Invalid(String),
    /// Recording them would take the task's answers past this many bytes; nothing was
    /// recorded.
    TooLarge(u64),
    /// Answers recorded; this many requests are still outstanding.
    Waiting(usize),
    /// Every request is answered: the task is `working` again and its job enqueued.
    Resumed,
}

/// Result of `TaskStore::create`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// A new task, durable when this returns.
    New(TaskRecord),
    /// The same call was made before within the idempotency window: that task.
    Existing(TaskRecord),
    /// The idempotency scope (e.g. an `Idempotency-Key`) was used within the window for a
    /// different call (tool or arguments): nothing was created.
    KeyReused,
}

impl Created {
    /// The task, unless the key was reused for another call.
    pub fn record(&self) -> Option<&TaskRecord> {
        match self {
            Self::New(r) | Self::Existing(r) => Some(r),
            Self::KeyReused => None,
        }
    }

    /// The task, owned, unless the key was reused for another call.
    pub fn into_record(self) -> Option<TaskRecord> {
        match self {
            Self::New(r) | Self::Existing(r) => Some(r),
            Self::KeyReused => None,
        }
    }
}

/// Result of `TaskStore::cancel`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// Moved to `cancelled` now.
    Now(TaskRecord),
    /// Already terminal; unchanged.
    AlreadyTerminal(TaskRecord),
    /// Unknown, expired, or another owner's.
    NotFound,
}

/// A unit of work on the queue: run (or resume) a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The task.
    pub task: TaskId,
    /// The queue entry (acknowledged when the task leaves `working`); empty for a task run
    /// where it was created, which has no queue entry (its lease is recorded instead).
    pub entry: String,
}

/// The right to run a task, proven by a fencing token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The task.
    pub task: TaskId,
    /// Increases with every claim; writes with an older token are refused.
    pub token: u64,
    /// The queue entry of the job being run (renewals keep it from being reclaimed); empty
    /// for a task run where it was created.
    pub entry: String,
    /// The worker holding the lease.
    pub worker: String,
    /// What the task's sealed values are bound to (its id, owner, era and tool), computed
    /// from the record when the lease was handed out, so the values written under the lease
    /// are sealed with it without reading the record again.
    pub(crate) binding: mcpgate_seal::RecordBinding,
}

/// Why a job is not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// The task is gone (expired or deleted); the job was acknowledged.
    Gone,
    /// The task is terminal; the job was acknowledged.
    Terminal,
    /// The task waits for input; the job was acknowledged (answers re-enqueue it).
    Parked,
    /// Another worker holds a live lease; the job stays pending.
    Busy,
}

/// Result of `TaskStore::claim`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// Run it under this lease.
    Run {
        /// The lease.
        lease: Lease,
        /// The task.
        task: Box<TaskRecord>,
    },
    /// Do not run it.
    Skip(Skip),
    /// Attempts used up: the task is now `failed` and the job dead-lettered.
    Exhausted {
        /// The task's tool (for metrics).
        tool: String,
    },
}

/// Result of `TaskStore::renew`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Still ours; extended.
    Held,
    /// The task was cancelled: stop.
    Cancelled,
    /// The task is gone (expired): stop.
    Gone,
    /// Another worker took it over (our lease lapsed): stop without writing.
    Lost,
}

/// Result of `TaskStore::finish` and `TaskStore::park`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settled {
    /// Written; the job was acknowledged.
    Done,
    /// Already terminal (e.g. cancelled meanwhile); nothing written, job acknowledged.
    AlreadyTerminal,
    /// Our lease was superseded; nothing written, job left to its new owner.
    Lost,
    /// The task is gone; job acknowledged.
    Gone,
    /// `TaskStore::defer` only: no replica could run the task within the grace
    /// period, so it failed; job acknowledged.
    GaveUp,
}

/// Position in an owner's task list (exclusive).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListCursor(pub String);

/// One page of an owner's tasks, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The tasks.
    pub tasks: Vec<TaskRecord>,
    /// Where the next page starts, if there is one.
    pub next: Option<ListCursor>,
}

/// Something happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskEvent {
    /// Its status is now this.
    Status(TaskStatus),
    /// Events may have been missed (e.g. a reconnect): read the task again.
    Resync,
}
