//! Upstream lists on Redis: one string per upstream and a generation counter, in one hash
//! slot so a save is one atomic MULTI (set the lists, advance the generation).

use super::{RedisStore, Retry};
use crate::contract::UpstreamLists;
use crate::error::StoreError;

impl UpstreamLists for RedisStore {
    async fn save_lists(&self, upstream: &str, lists: &str) -> Result<u64, StoreError> {
        let keys = &self.inner.keys;
        let mut pipe = redis::pipe();
        pipe.atomic().set(keys.lists(upstream), lists).ignore().incr(keys.lists_generation(), 1);
        // Safe to repeat: the same lists again, and a generation advanced once more.
        let (generation,): (u64,) = self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
        Ok(generation)
    }

    async fn load_lists(&self, upstream: &str) -> Result<Option<String>, StoreError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.inner.keys.lists(upstream));
        self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await
    }

    async fn lists_generation(&self) -> Result<u64, StoreError> {
        let mut cmd = redis::cmd("GET");
        cmd.arg(self.inner.keys.lists_generation());
        let generation: Option<u64> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        Ok(generation.unwrap_or(0))
    }
}
