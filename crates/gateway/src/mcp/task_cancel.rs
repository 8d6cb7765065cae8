//! Cancelling a task, whoever asks: its owner (`tasks/cancel`, the `task_cancel` companion),
//! an operator (the admin API), or a 2025-11-25 client that left a call which had become a
//! task.
//!
//! Invariant: a cancellation that ends a task counts it once in
//! `mcpgate_tasks_total{event="cancelled"}` on the replica that cancelled it, whichever way
//! it came; one that finds the task already ended, or gone, counts nothing.

use std::sync::{Arc, OnceLock};

use mcpgate_runtime::task_metrics::{TaskMetric, TaskMetrics};
use mcpgate_store::{AnyStore, Cancelled, StoreError, TaskId, TaskStore as _};

/// Where cancellations are counted: the replica's task metrics, which exist only once the
/// first catalog snapshot has named the task tools, after the companions were registered.
pub type CancelCounter = Arc<OnceLock<Arc<TaskMetrics>>>;

/// Cancels `id` as `owner` (the store's idempotent cancel) and counts it if it ended the task.
pub(crate) async fn cancel(
    store: &AnyStore,
    metrics: Option<&TaskMetrics>,
    id: &TaskId,
    owner: &str,
) -> Result<Cancelled, StoreError> {
    let cancelled = store.cancel(id, owner).await?;
    if let (Cancelled::Now(record), Some(metrics)) = (&cancelled, metrics) {
        metrics.count(&record.tool, TaskMetric::Cancelled);
    }
    Ok(cancelled)
}
