//! Quotas on Redis (see [`crate::quota`]): a caller's running, retained and bytes sets (and
//! the bytes hash) share the caller's own hash tag, so `quota.lua` checks and reserves in one slot, in one round trip.
//! A caller found at its running quota has its counted tasks' statuses read (one HGET each,
//! sent together); those that ended or expired are dropped and the reservation is tried once
//! more, so a crash between a task's end and anything else can never leave it counted.

use redis::Value;

use super::record::{item, parse_status};
use super::{RedisStore, Retry, scripts};
use crate::error::StoreError;
use crate::model::TaskId;
use crate::quota::{Quota, QuotaKind};

impl RedisStore {
    /// Reserves a place for task `id` (living `ttl_ms`, `None` = unlimited) within `quota`,
    /// or fails with [`StoreError::QuotaExceeded`].
    pub(super) async fn reserve(
        &self,
        quota: &Quota,
        id: &TaskId,
        ttl_ms: Option<u64>,
        bytes: u64,
    ) -> Result<(), StoreError> {
        let mut checked = false;
        loop {
            let out = self.try_reserve(quota, id, ttl_ms, bytes).await?;
            let code = item(&out, 0).and_then(|c| c.parse::<i64>().ok());
            let wait = item(&out, 1).and_then(|w| w.parse::<i64>().ok());
            match code {
                Some(0) => return Ok(()),
                Some(1) if !checked && self.drop_ended(quota).await? > 0 => checked = true,
                Some(1) => {
                    return Err(StoreError::QuotaExceeded {
                        kind: QuotaKind::Running,
                        max: quota.max_running,
                        retry_after_ms: None,
                    });
                }
                Some(2) => {
                    return Err(StoreError::QuotaExceeded {
                        kind: QuotaKind::Retained,
                        max: quota.max_retained,
                        retry_after_ms: wait.and_then(|w| u64::try_from(w).ok()),
                    });
                }
                Some(3) => {
                    return Err(StoreError::QuotaExceeded {
                        kind: QuotaKind::Bytes,
                        max: quota.max_bytes,
                        retry_after_ms: wait.and_then(|w| u64::try_from(w).ok()),
                    });
                }
                _ => return Err(StoreError::corrupt("unexpected quota reply")),
            }
        }
    }

    /// Gives back the place reserved for `id` (its creation found an earlier task, or failed).
    pub(super) async fn unreserve(&self, quota: &Quota, id: &TaskId) -> Result<(), StoreError> {
        self.forget_places(&quota.scope, id, quota.max_bytes > 0).await
    }

    /// Stops counting `id` in the running and retained sets of caller `scope`, and, with
    /// `bytes`, in its bytes.
    pub(super) async fn forget_places(&self, scope: &str, id: &TaskId, bytes: bool) -> Result<(), StoreError> {
        let keys = &self.inner.keys;
        let mut pipe = redis::pipe();
        pipe.zrem(keys.quota(scope, "running"), id.as_str())
            .ignore()
            .zrem(keys.quota(scope, "retained"), id.as_str())
            .ignore();
        self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async::<()>(conn))).await?;
        if bytes {
            self.charge_bytes(scope, id, "drop".to_owned()).await?;
        }
        Ok(())
    }

    /// Runs `charge.lua` for task `id` of caller `scope` (`change`: bytes to add, or `drop`).
    pub(super) async fn charge_bytes(&self, scope: &str, id: &TaskId, change: String) -> Result<(), StoreError> {
        let keys = &self.inner.keys;
        // Adding is not idempotent: a charge whose reply was lost is not sent again (the
        // task counts a little less rather than twice).
        let retry = if change == "drop" { Retry::Yes } else { Retry::No };
        self.script(
            retry,
            &scripts::CHARGE,
            vec![keys.quota(scope, "bytes"), keys.quota(scope, "sizes")],
            vec![id.to_string(), change],
        )
        .await
        .map(drop)
    }

    async fn try_reserve(
        &self,
        quota: &Quota,
        id: &TaskId,
        ttl_ms: Option<u64>,
        bytes: u64,
    ) -> Result<Vec<Value>, StoreError> {
        let keys = &self.inner.keys;
        let out = self
            .script(
                Retry::Yes,
                &scripts::QUOTA,
                ["running", "retained", "bytes", "sizes"].iter().map(|set| keys.quota(&quota.scope, set)).collect(),
                vec![
                    id.to_string(),
                    ttl_ms.map_or_else(|| "-1".to_owned(), |t| t.to_string()),
                    quota.max_running.to_string(),
                    quota.max_retained.to_string(),
                    quota.max_bytes.to_string(),
                    bytes.to_string(),
                ],
            )
            .await?;
        match out {
            Value::Array(items) => Ok(items),
            other => Err(StoreError::corrupt(format!("unexpected quota reply {other:?}"))),
        }
    }

    /// Drops from the running set the tasks that ended or expired; returns how many.
    async fn drop_ended(&self, quota: &Quota) -> Result<usize, StoreError> {
        let running = self.inner.keys.quota(&quota.scope, "running");
        let mut range = redis::cmd("ZRANGE");
        range.arg(&running).arg(0).arg(-1);
        let members: Vec<String> = self.call(Retry::Yes, &range, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        let ids: Vec<TaskId> = members.iter().filter_map(|m| TaskId::parse(m)).collect();
        // One HGET per task (each in its own shard's slot), sent together.
        let reads: Vec<redis::Cmd> = ids
            .iter()
            .map(|id| {
                let mut cmd = redis::cmd("HGET");
                cmd.arg(self.inner.keys.task(id)).arg("status");
                cmd
            })
            .collect();
        let statuses: Vec<Option<String>> = self.call_each(Retry::Yes, reads).await?;
        let ended: Vec<&str> = ids
            .iter()
            .zip(&statuses)
            .filter(|(_, status)| status.as_deref().and_then(parse_status).is_none_or(|s| s.is_terminal()))
            .map(|(id, _)| id.as_str())
            .collect();
        // Members that are not task ids at all are dropped too.
        let stray: Vec<&str> = members.iter().filter(|m| TaskId::parse(m).is_none()).map(String::as_str).collect();
        let dropped = ended.len() + stray.len();
        if dropped > 0 {
            let mut zrem = redis::cmd("ZREM");
            zrem.arg(&running).arg(&ended).arg(&stray);
            self.call(Retry::Yes, &zrem, |conn, cmd| Box::pin(cmd.query_async::<()>(conn))).await?;
        }
        Ok(dropped)
    }
}
