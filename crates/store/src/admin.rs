//! What an operator's admin API needs of the store beyond the task contract: every task, page
//! by page, whoever owns it; and deleting ended tasks before they expire.
//!
//! Invariant: a purge deletes a task only if it is terminal (checked in the same atomic step
//! as the delete), so a working or parked task is never lost to an operator's purge; a scan
//! visits every task that exists for its whole length at least once (it may see one twice, or
//! miss one created or deleted meanwhile), and never fetches payloads.

use mcpgate_protocol::task::TaskStatus;

use crate::model::TaskRecord;

/// One page of a scan: tasks as a [`Read::Control`](crate::model::Read::Control) read sees them.
#[derive(Debug, Clone, Default)]
pub struct ScanPage {
    /// The tasks found in this step (possibly none, with more to come).
    pub tasks: Vec<TaskRecord>,
    /// Where the next step starts; `None` once every task was visited.
    pub next: Option<String>,
}

/// What a purge of one task did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Purged {
    /// Deleted; its creator's issuer and subject, for the quotas it was counted in.
    Deleted {
        /// Issuer of the creator.
        issuer: String,
        /// Subject of the creator.
        subject: String,
    },
    /// Not deleted: it has not ended.
    Live(TaskStatus),
    /// Not deleted: its status is not one of those asked for, or it ended more recently than
    /// asked.
    Skipped,
    /// No such task (or it expired).
    NotFound,
}

/// Which ended tasks a purge deletes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PurgeFilter {
    /// Terminal statuses to delete (others are skipped).
    pub statuses: Vec<TaskStatus>,
    /// Delete only tasks whose last change is at least this old (0 = any).
    pub older_than_ms: u64,
}
