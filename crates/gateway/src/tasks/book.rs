//! Finding and cancelling a task as its owner, whoever asks: the task methods of both eras,
//! the background-task companions, listen streams, the admin API (as the task's owner), and a
//! 2025-11-25 client that left a call which had become a task.
//!
//! Invariants: a task is found only by its owner (another's, unknown and expired tasks are
//! all "none", indistinguishably); a cancellation that ends a task counts it once in
//! `mcpgate_tasks_total{event="cancelled"}` on the replica that cancelled it, whichever way
//! it came, and one that finds the task already ended, or gone, counts nothing. Both the
//! creation and such a cancellation are reported to the transition observer (the audit trail)
//! exactly when they are counted.

use std::sync::Arc;

use mcpgate_runtime::task_metrics::{TaskMetric, TaskMetrics};
use mcpgate_runtime::task_transition::{TaskTransition, TransitionNote, TransitionObserver};
use mcpgate_store::{AnyStore, Cancelled, Read, StoreError, TaskId, TaskRecord, TaskStore as _};

/// The tasks of the store as their owners see them, with this replica's task counters.
#[derive(Debug, Clone)]
pub(crate) struct TaskBook {
    store: AnyStore,
    metrics: Arc<TaskMetrics>,
    transitions: Option<Arc<dyn TransitionObserver>>,
}

impl TaskBook {
    /// The book over `store`, counting into `metrics`.
    pub(crate) fn new(store: AnyStore, metrics: Arc<TaskMetrics>) -> Self {
        Self { store, metrics, transitions: None }
    }

    /// The same book, reporting creations and cancellations to `observer` too.
    pub(crate) fn with_transitions(mut self, observer: Option<Arc<dyn TransitionObserver>>) -> Self {
        self.transitions = observer;
        self
    }

    fn report(&self, record: &TaskRecord, transition: TaskTransition) {
        if let Some(observer) = &self.transitions {
            observer.transition(&TransitionNote::of(record, transition));
        }
    }

    /// This replica's task counters.
    pub(crate) fn metrics(&self) -> &Arc<TaskMetrics> {
        &self.metrics
    }

    /// `owner`'s task `id` (read as `read` says), or `None`: unknown, expired or another's.
    pub(crate) async fn find(&self, id: &TaskId, owner: &str, read: Read) -> Result<Option<TaskRecord>, StoreError> {
        Ok(self.store.get(id, read).await?.filter(|record| record.owner == owner))
    }

    /// Cancels `id` as `owner` (the store's idempotent cancel) and counts it if it ended the task.
    pub(crate) async fn cancel(&self, id: &TaskId, owner: &str) -> Result<Cancelled, StoreError> {
        let cancelled = self.store.cancel(id, owner).await?;
        if let Cancelled::Now(record) = &cancelled {
            self.metrics.count(&record.tool, TaskMetric::Cancelled);
            self.report(record, TaskTransition::Cancelled);
        }
        Ok(cancelled)
    }

    /// Counts a task just created (durably, and not found again by an idempotent retry).
    pub(super) fn created(&self, record: &TaskRecord) {
        self.metrics.count(&record.tool, TaskMetric::Created);
        self.report(record, TaskTransition::Created);
    }
}
