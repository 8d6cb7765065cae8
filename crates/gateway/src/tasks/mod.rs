//! The task service: the one place where tasks come to be (for a call, in the background, or
//! adopted from a call already running), are found by their owner, and are cancelled, whoever
//! asks. Handlers of both eras, the background-task companions, listen streams and the admin
//! API go through it, never straight to the store for these.
//!
//! Invariants: see each part — `admission` (what a new task costs), `create` (counted once,
//! durable before anyone hears of it), `answer` (a task that ends at once may answer its
//! 2026-07-28 call with its outcome; it stays stored), `book` (the one owner check; every
//! cancellation that ends a task is counted).

mod admission;
mod answer;
mod book;
pub(crate) mod companions;
mod create;
pub(crate) mod idempotency;
mod plan;

use std::collections::HashSet;
use std::sync::Arc;

use mcpgate_runtime::catalog::ToolDescriptor;
use mcpgate_runtime::task_metrics::TaskMetrics;
use mcpgate_runtime::worker::Workers;
use mcpgate_store::{AnyStore, Cancelled, Read, StoreError, TaskId, TaskRecord};

use crate::config::{AuthMode, Config, LimitsConfig, TasksConfig};
use crate::limits::Limits;

pub(crate) use admission::call_charge;
pub(crate) use answer::CallAnswer;
pub(crate) use book::TaskBook;
pub(crate) use create::Adoption;
pub(crate) use plan::{TaskPlan, TtlRequest};

/// What the service needs of the configuration.
#[derive(Debug)]
struct Settings {
    tasks: TasksConfig,
    /// The per-caller task quotas (`limits.max_*_tasks`, `limits.max_stored_bytes`).
    quotas: LimitsConfig,
    /// Whether tasks are indexed by owner: only `tasks/list` reads the index, and it is
    /// served only behind authentication.
    indexed: bool,
    /// Upstreams that exchange the caller's token on every call.
    exchanging: HashSet<String>,
}

/// Creates, finds and cancels tasks (see the module docs).
#[derive(Debug)]
pub(crate) struct TaskService {
    book: TaskBook,
    store: AnyStore,
    workers: Workers,
    limits: Arc<Limits>,
    settings: Settings,
}

impl TaskService {
    /// The service of a replica: its store (through `book`), workers and rate limits.
    pub(crate) fn new(config: &Config, book: TaskBook, store: AnyStore, workers: Workers, limits: Arc<Limits>) -> Self {
        let settings = Settings {
            tasks: config.tasks.clone(),
            quotas: config.limits.clone(),
            indexed: config.auth.mode != AuthMode::None,
            exchanging: config.upstream.iter().filter(|u| u.token_exchange.is_some()).map(|u| u.name.clone()).collect(),
        };
        Self { book, store, workers, limits, settings }
    }

    /// Finding and cancelling as the owner.
    pub(crate) fn book(&self) -> &TaskBook {
        &self.book
    }

    /// This replica's task workers.
    pub(crate) fn workers(&self) -> &Workers {
        &self.workers
    }

    /// This replica's task counters.
    pub(crate) fn metrics(&self) -> &Arc<TaskMetrics> {
        self.book.metrics()
    }

    /// `owner`'s task `id`, or `None` (unknown, expired or another's).
    pub(crate) async fn find(&self, id: &TaskId, owner: &str, read: Read) -> Result<Option<TaskRecord>, StoreError> {
        self.book.find(id, owner, read).await
    }

    /// Cancels `owner`'s task `id`, counting it if that ended the task.
    pub(crate) async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        self.book.cancel(id, owner).await
    }

    /// Whether a task of `tool` keeps its caller's bearer token (sealed in the record): the
    /// tool is an upstream's that exchanges the caller's token on every call, so a run on any
    /// replica needs it. No other task keeps it.
    pub(crate) fn keeps_credential(&self, tool: &ToolDescriptor) -> bool {
        tool.upstream.as_deref().is_some_and(|name| self.settings.exchanging.contains(name))
    }
}
