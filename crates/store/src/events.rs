//! Local fan-out of task events: one entry per task with subscribers on this replica, each a
//! broadcast channel. Subscriptions leave when dropped, and the entry goes away with the last
//! one. Catalog changes have one broadcast channel of their own, always open.
//!
//! Invariant: a subscription handed out is "ready": the backend subscription it relies on is
//! confirmed, so no event of a later transition can be missed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;

use crate::change::Change;
use crate::model::{TaskEvent, TaskId};

/// Events buffered per task before a slow subscriber is told to resync.
const BUFFER: usize = 16;
/// Catalog changes buffered before a slow listener is told it missed some.
const CHANGE_BUFFER: usize = 64;

/// Called when the first local subscriber of a task arrives or the last one leaves.
pub(crate) trait Watcher: Send + Sync {
    /// The last local subscriber of `id` left.
    fn unwatch(&self, id: &TaskId);
}

/// Per-replica registry of task subscribers.
#[derive(Clone)]
pub(crate) struct Hub {
    inner: Arc<Mutex<HashMap<TaskId, broadcast::Sender<TaskEvent>>>>,
    changes: broadcast::Sender<Change>,
}

impl Hub {
    pub(crate) fn new() -> Self {
        Self { inner: Arc::new(Mutex::new(HashMap::new())), changes: broadcast::channel(CHANGE_BUFFER).0 }
    }

    /// A feed of catalog changes from now on.
    pub(crate) fn changes(&self) -> broadcast::Receiver<Change> {
        self.changes.subscribe()
    }

    /// Delivers a catalog change to this replica's listeners.
    pub(crate) fn deliver_change(&self, change: Change) {
        let _ = self.changes.send(change);
    }

    /// Adds a subscriber; returns it and whether it is the first for this task.
    pub(crate) fn join(&self, id: &TaskId, watcher: Arc<dyn Watcher>) -> (Subscription, bool) {
        let mut map = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut first = false;
        let sender = map.entry(id.clone()).or_insert_with(|| {
            first = true;
            broadcast::channel(BUFFER).0
        });
        let rx = sender.subscribe();
        (Subscription { rx, id: id.clone(), hub: self.clone(), watcher }, first)
    }

    /// Delivers an event to this replica's subscribers of `id`.
    pub(crate) fn deliver(&self, id: &TaskId, event: TaskEvent) {
        let map = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(sender) = map.get(id) {
            let _ = sender.send(event);
        }
    }

    /// Tells every subscriber to read its task again (after events may have been lost).
    pub(crate) fn resync_all(&self) {
        let map = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for sender in map.values() {
            let _ = sender.send(TaskEvent::Resync);
        }
        let _ = self.changes.send(Change::Missed);
    }

    /// Whether anyone local waits on this task.
    pub(crate) fn is_watched(&self, id: &TaskId) -> bool {
        let map = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.contains_key(id)
    }

    fn leave(&self, id: &TaskId) -> bool {
        let mut map = self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let last = map.get(id).is_some_and(|s| s.receiver_count() == 0);
        if last {
            map.remove(id);
        }
        last
    }
}

/// A live subscription to one task's events.
pub struct Subscription {
    rx: broadcast::Receiver<TaskEvent>,
    id: TaskId,
    hub: Hub,
    watcher: Arc<dyn Watcher>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription").field("task", &self.id).finish_non_exhaustive()
    }
}

impl Subscription {
    /// The next event; a subscriber that fell behind gets [`TaskEvent::Resync`].
    pub async fn next(&mut self) -> TaskEvent {
        match self.rx.recv().await {
            Ok(event) => event,
            Err(broadcast::error::RecvError::Lagged(_)) => TaskEvent::Resync,
            // The hub keeps the sender while any receiver exists, so this cannot happen;
            // resync is the safe answer anyway.
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Our receiver must be gone before counting; swap in a fresh one that is dropped at once.
        let (_, dummy) = broadcast::channel(1);
        drop(std::mem::replace(&mut self.rx, dummy));
        if self.hub.leave(&self.id) {
            self.watcher.unwatch(&self.id);
        }
    }
}
