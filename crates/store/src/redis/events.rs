//! Task events and catalog changes on Redis: published on the task's channel (or the changes
//! channel) with `PUBLISH`, received through the subscriber's one connection (see
//! `subscriber`), which fans them out to this replica's waiters.

use super::{RedisStore, Retry};
use crate::contract::EventBus;
use crate::error::StoreError;
use crate::events::Subscription;
use crate::model::{TaskEvent, TaskId};

impl EventBus for RedisStore {
    async fn subscribe(&self, id: &TaskId) -> Result<Subscription, StoreError> {
        self.inner.subscriber.subscribe(id).await
    }

    async fn publish(&self, id: &TaskId, event: TaskEvent) -> Result<(), StoreError> {
        let channel = self.inner.keys.channel(id);
        let payload = match event {
            TaskEvent::Status(s) => s.as_str(),
            TaskEvent::Resync => "resync",
        };
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(&channel).arg(payload);
        self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(async move { cmd.query_async::<i64>(conn).await.map(drop) }))
            .await
    }

    async fn publish_change(&self, change: &crate::change::Change) -> Result<(), StoreError> {
        let mut cmd = redis::cmd("PUBLISH");
        cmd.arg(self.inner.keys.changes_channel()).arg(change.encode());
        self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(async move { cmd.query_async::<i64>(conn).await.map(drop) }))
            .await
    }

    fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::change::Change> {
        self.inner.subscriber.changes()
    }
}
