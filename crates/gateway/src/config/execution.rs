//! The sections of how calls and tasks run: durable tasks (`[tasks]`), background tools'
//! companions (`[background]`), the per-principal limits shared by every replica (`[limits]`)
//! and the upstream servers' federation (`[federation]`). Each default is declared once, in
//! its `Default` impl.

use serde::{Deserialize, Serialize};

/// `[tasks]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TasksConfig {
    /// Lifetime of a task when the client asks for none.
    pub default_ttl_ms: u64,
    /// Longest lifetime granted; longer requests are clamped.
    pub max_ttl_ms: u64,
    /// Whether a client may ask for an unlimited lifetime.
    pub allow_unlimited_ttl: bool,
    /// Suggested poll interval.
    pub poll_interval_ms: u64,
    /// How long a 2026-07-28 call whose task runs on this replica waits for the run to end,
    /// to answer with its outcome instead of the task (0: always answer with the task).
    pub answer_within_ms: u64,
    /// How long a retried call is recognised as the same call.
    pub idempotency_window_ms: u64,
    /// Largest single answer to an input request (`tasks/update`, a legacy response).
    pub max_answer_bytes: u64,
    /// Most bytes of answers one task may collect over all its rounds.
    pub max_task_answer_bytes: u64,
    /// How long a task whose tool no replica knows is passed between replicas before it fails.
    pub unknown_tool_grace_secs: u64,
    /// Tasks run at once per replica.
    pub max_running: u64,
    /// Lease length (renewed every third of it).
    pub lease_ms: u64,
    /// Executions started per task before it fails.
    pub max_attempts: u64,
    /// Legacy `tasks/result` requests waiting at once per replica.
    pub max_result_waiters: u64,
    /// Of those, how many one authenticated principal may hold.
    pub max_result_waiters_per_principal: u64,
    /// Whom a task belongs to under `auth.mode = none`.
    pub anonymous_scope: AnonymousScope,
}

impl Default for TasksConfig {
    fn default() -> Self {
        Self {
            default_ttl_ms: 3_600_000,
            max_ttl_ms: 86_400_000,
            allow_unlimited_ttl: false,
            poll_interval_ms: 1_000,
            answer_within_ms: 50,
            idempotency_window_ms: 300_000,
            max_answer_bytes: 1_048_576,
            max_task_answer_bytes: 4_194_304,
            unknown_tool_grace_secs: 300,
            max_running: 256,
            lease_ms: 30_000,
            max_attempts: 3,
            max_result_waiters: 10_000,
            max_result_waiters_per_principal: 64,
            anonymous_scope: AnonymousScope::Session,
        }
    }
}

/// Whom a task belongs to when every caller is the one anonymous principal
/// (`auth.mode = none`); with real principals a task is always its principal's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AnonymousScope {
    /// A task created in a legacy session is seen only in that session (2025-11-25 clients);
    /// requests without a session (2026-07-28) share the server's scope.
    #[default]
    Session,
    /// Every anonymous caller sees every task (one trusted user, e.g. on a laptop).
    Server,
}

/// `[background]`: what a client that knows no tasks uses to follow a background tool.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BackgroundConfig {
    /// Name of the companion tool that reports a background task's status.
    pub status_tool: String,
    /// Name of the companion tool that returns a background task's result.
    pub result_tool: String,
    /// Name of the companion tool that cancels a background task.
    pub cancel_tool: String,
    /// Retry advice of the busy answer given while this replica's task workers are all taken.
    pub busy_retry_secs: u64,
}

impl Default for BackgroundConfig {
    fn default() -> Self {
        Self {
            status_tool: "task_status".to_owned(),
            result_tool: "task_result".to_owned(),
            cancel_tool: "task_cancel".to_owned(),
            busy_retry_secs: 5,
        }
    }
}

/// `[limits]`: rate limits and task quotas per principal (and per principal and upstream),
/// counted in the store so they hold across every replica. A rate of 0 is no limit; a burst of 0 is ten
/// seconds' worth of the rate (at least 1).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsConfig {
    /// `tools/call` requests a minute per principal.
    pub calls_per_minute: u64,
    /// Calls admitted at once.
    pub calls_burst: u64,
    /// Task creations a minute per principal.
    pub tasks_per_minute: u64,
    /// Task creations admitted at once.
    pub tasks_burst: u64,
    /// `tasks/get` polls a minute per principal: past the burst a poll is still answered,
    /// with a longer poll interval saying when to poll next; only a client polling twice as fast
    /// as that is refused.
    pub polls_per_minute: u64,
    /// Polls admitted at once before the advice starts.
    pub polls_burst: u64,
    /// Calls a minute per principal to one upstream's tools (an upstream's own
    /// `limits.calls_per_minute` overrides it).
    pub upstream_calls_per_minute: u64,
    /// Task creations a minute per principal for one upstream's tools (an upstream's own
    /// `limits.tasks_per_minute` overrides it).
    pub upstream_tasks_per_minute: u64,
    /// Tasks of one principal running at once (working or waiting for input), across every
    /// replica; a creation beyond it is refused.
    pub max_running_tasks: u64,
    /// Tasks of one principal retained at once (any status, until they expire).
    pub max_retained_tasks: u64,
    /// Bytes one principal's retained tasks may hold: arguments, answers and state given at
    /// creation, and results once recorded.
    pub max_stored_bytes: u64,
}

/// `[federation]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FederationConfig {
    /// Between the upstream name and its tool or prompt name.
    pub separator: String,
    /// Re-read upstream lists this often.
    pub list_refresh_secs: u64,
    /// A Claude-Desktop-style JSON file whose `mcpServers` become upstreams.
    pub mcp_servers_file: Option<String>,
    /// The environment variables that file's `${VAR}`s may name (it may be a third party's:
    /// no other variable of the replica's environment is expanded into it).
    pub import_env: Vec<String>,
    /// How long start-up waits for the upstreams' lists.
    pub startup_wait_secs: u64,
}

impl Default for FederationConfig {
    fn default() -> Self {
        Self {
            separator: "_".to_owned(),
            list_refresh_secs: 60,
            mcp_servers_file: None,
            import_env: Vec::new(),
            startup_wait_secs: 30,
        }
    }
}
