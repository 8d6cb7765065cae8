//! The admin view on the memory store (see `TaskAdmin`): a scan in task-id order, resumed
//! after the last id it returned, and purges that drop every trace of an ended task.

use mcpgate_protocol::task::TaskStatus;

use super::MemoryStore;
use super::state::State;
use crate::admin::{PurgeFilter, Purged, ScanPage};
use crate::contract::TaskAdmin;
use crate::error::StoreError;
use crate::model::{Read, TaskId};

impl TaskAdmin for MemoryStore {
    async fn scan(&self, cursor: Option<&str>, count: usize) -> Result<ScanPage, StoreError> {
        Ok(self.with(|s, _| s.scan(cursor, count)))
    }

    async fn purge(&self, id: &TaskId, filter: &PurgeFilter) -> Result<Purged, StoreError> {
        Ok(self.with(|s, now| s.purge_task(id, filter, now)))
    }

    async fn forget_quota(&self, _scope: &str, _id: &TaskId) -> Result<(), StoreError> {
        // Quotas count the tasks that exist: a purged task no longer does.
        Ok(())
    }
}

impl State {
    fn scan(&self, cursor: Option<&str>, count: usize) -> ScanPage {
        let mut ids: Vec<&TaskId> = self.tasks.keys().filter(|id| cursor.is_none_or(|c| id.as_str() > c)).collect();
        ids.sort_unstable();
        let more = ids.len() > count;
        ids.truncate(count);
        let next = if more { ids.last().map(|id| id.as_str().to_owned()) } else { None };
        ScanPage { tasks: ids.into_iter().map(|id| self.tasks[id].view(Read::Control)).collect(), next }
    }

    fn purge_task(&mut self, id: &TaskId, filter: &PurgeFilter, now: u64) -> Purged {
        let Some(entry) = self.tasks.get(id) else { return Purged::NotFound };
        let record = &entry.record;
        if !record.status.is_terminal() {
            return Purged::Live(record.status);
        }
        if !filter.statuses.contains(&record.status) || now.saturating_sub(record.updated_ms) < filter.older_than_ms {
            return Purged::Skipped;
        }
        let Some(entry) = self.tasks.remove(id) else { return Purged::NotFound };
        let record = entry.record;
        if let Some(ttl) = record.ttl_ms {
            self.expiries.remove(&(record.created_ms.saturating_add(ttl), id.clone()));
        }
        if let Some(index) = self.owners.get_mut(&record.owner) {
            index.remove(&(record.created_ms, id.clone()));
            if index.is_empty() {
                self.owners.remove(&record.owner);
            }
        }
        debug_assert!(matches!(record.status, TaskStatus::Completed | TaskStatus::Failed | TaskStatus::Cancelled));
        Purged::Deleted { issuer: record.issuer, subject: record.subject }
    }
}
