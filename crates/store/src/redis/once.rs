//! Single-use marks on Redis: one key per id, set only if absent (`SET NX`) and expiring with
//! what it marks, so the first use wins on every replica.

use super::{RedisStore, Retry};
use crate::contract::OnceMarks;
use crate::error::StoreError;

impl OnceMarks for RedisStore {
    async fn first_use(&self, id: &str, expires_at_ms: u64) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.inner.keys.once(id)).arg(1).arg("NX").arg("PXAT").arg(expires_at_ms.max(1));
        // Not retried: after a lost reply the retry would find its own mark and say "used".
        // Waited for like a task write (`store.replicas_ack`): a mark lost in a failover would
        // let a spent link or state be used again.
        let set: Option<String> = self.command_acked(Retry::No, cmd).await?;
        Ok(set.is_some())
    }
}
