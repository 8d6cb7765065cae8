//! The admin view on Redis (see `TaskAdmin`): scans with `SCAN` (on one server, one cursor
//! over the keyspace; on a cluster, shard by shard, each on the node that owns the shard's
//! slot), reads the control fields of what it found in one batch, and purges ended tasks with
//! `purge.lua` (which tells every replica, so none answers from its cache of finished records
//! a task purged). `SCAN` walks the whole keyspace, which is why this is for operators only: no
//! request path scans.

use redis::Value;
use redis::cluster_routing::{Route, RoutingInfo, SingleNodeRoutingInfo, SlotAddr};

use super::conn::Conn;
use super::record::{CONTROL_FIELDS, decode_fields, decode_named, item, parse_status};
use super::{Backend, RedisStore, Retry, scripts};
use crate::admin::{PurgeFilter, Purged, ScanPage};
use crate::contract::TaskAdmin;
use crate::error::StoreError;
use crate::model::{TaskId, TaskRecord};

/// Most keys one step asks `SCAN` for.
const MAX_COUNT: usize = 1000;

impl TaskAdmin for RedisStore {
    async fn scan(&self, cursor: Option<&str>, count: usize) -> Result<ScanPage, StoreError> {
        let count = count.clamp(1, MAX_COUNT);
        let (keys, next) = match &self.inner.backend {
            Backend::Single { .. } => self.scan_server(cursor, count).await?,
            Backend::Cluster { .. } => self.scan_shards(cursor, count).await?,
        };
        let reads: Vec<redis::Cmd> = keys
            .iter()
            .map(|key| {
                let mut cmd = redis::cmd("HMGET");
                cmd.arg(key).arg(CONTROL_FIELDS);
                cmd
            })
            .collect();
        let records: Vec<Vec<Value>> = self.call_each(Retry::Yes, reads).await?;
        let mut tasks: Vec<TaskRecord> = Vec::with_capacity(records.len());
        for values in records {
            // Gone since the scan saw it: skipped.
            if let Some(record) = decode_named(decode_fields(CONTROL_FIELDS, values))? {
                tasks.push(record);
            }
        }
        Ok(ScanPage { tasks, next })
    }

    async fn purge(&self, id: &TaskId, filter: &PurgeFilter) -> Result<Purged, StoreError> {
        let mut statuses = String::from(",");
        for status in &filter.statuses {
            statuses.push_str(status.as_str());
            statuses.push(',');
        }
        let out = self
            .script(
                Retry::Yes,
                &scripts::PURGE,
                vec![self.inner.keys.task(id)],
                vec![statuses, filter.older_than_ms.to_string(), self.inner.keys.channel(id)],
            )
            .await;
        // Gone here at once whatever the reply (a lost reply may hide a delete); the other
        // replicas drop it on the `purged` event the script published.
        self.inner.terminal.invalidate(id);
        let out = out?;
        let out = match out {
            Value::Array(items) => items,
            other => return Err(StoreError::corrupt(format!("unexpected purge reply {other:?}"))),
        };
        Ok(match item(&out, 0).as_deref() {
            Some("deleted") => Purged::Deleted {
                issuer: item(&out, 1).unwrap_or_default(),
                subject: item(&out, 2).unwrap_or_default(),
            },
            Some("live") => Purged::Live(
                item(&out, 1)
                    .and_then(|s| parse_status(&s))
                    .ok_or_else(|| StoreError::corrupt("purge reply without a status"))?,
            ),
            Some("skipped") => Purged::Skipped,
            Some("notfound") => Purged::NotFound,
            _ => return Err(StoreError::corrupt("unexpected purge reply")),
        })
    }

    async fn forget_quota(&self, scope: &str, id: &TaskId) -> Result<(), StoreError> {
        self.forget_places(scope, id, true).await
    }
}

impl RedisStore {
    /// One `SCAN` step over the server's keyspace for task records; the cursor is Redis's.
    async fn scan_server(
        &self,
        cursor: Option<&str>,
        count: usize,
    ) -> Result<(Vec<String>, Option<String>), StoreError> {
        let start: u64 = parse_cursor(cursor.unwrap_or("0"))?;
        let prefix = glob_escape(self.inner.keys.prefix());
        let pattern = format!("{prefix}:{{{prefix}:*}}:task:*");
        let mut cmd = redis::cmd("SCAN");
        cmd.arg(start).arg("MATCH").arg(&pattern).arg("COUNT").arg(count);
        let (next, keys): (String, Vec<String>) =
            self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        Ok((keys, (next != "0").then_some(next)))
    }

    /// `SCAN` steps shard by shard, each on the node owning the shard's slot, until some
    /// records were found or every shard was visited once in this call; the cursor is
    /// `<shard>.<Redis cursor>`.
    async fn scan_shards(
        &self,
        cursor: Option<&str>,
        count: usize,
    ) -> Result<(Vec<String>, Option<String>), StoreError> {
        let (mut shard, mut at) = match cursor {
            None => (0u16, 0u64),
            Some(c) => {
                let (shard, at) = c.split_once('.').ok_or_else(bad_cursor)?;
                (shard.parse().map_err(|_| bad_cursor())?, parse_cursor(at)?)
            }
        };
        let prefix = glob_escape(self.inner.keys.prefix());
        let mut found = Vec::new();
        for _ in 0..self.inner.shards {
            if shard >= self.inner.shards {
                return Ok((found, None));
            }
            let tag = u8::try_from(shard).unwrap_or(u8::MAX);
            let route = Route::with_key(self.inner.keys.jobs(tag), SlotAddr::Master);
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(at).arg("MATCH").arg(format!("{prefix}:{{{prefix}:{tag:02x}}}:task:*")).arg("COUNT").arg(count);
            let routing = RoutingInfo::SingleNode(SingleNodeRoutingInfo::SpecificNode(route));
            let reply: Value = self
                .call(Retry::Yes, &(cmd, routing), |conn, (cmd, routing)| {
                    Box::pin(async move {
                        match conn {
                            Conn::Cluster(c) => c.route_command(cmd.clone(), routing.clone()).await,
                            Conn::Single(c) => cmd.query_async(c).await,
                        }
                    })
                })
                .await?;
            let (next, keys): (String, Vec<String>) =
                redis::from_redis_value(reply).map_err(|e| StoreError::corrupt_caused("unexpected SCAN reply", e))?;
            found.extend(keys);
            if next == "0" {
                (shard, at) = (shard + 1, 0);
            } else {
                at = parse_cursor(&next)?;
            }
            if !found.is_empty() {
                break;
            }
        }
        let next = (shard < self.inner.shards).then(|| format!("{shard}.{at}"));
        Ok((found, next))
    }
}

fn parse_cursor(cursor: &str) -> Result<u64, StoreError> {
    cursor.parse().map_err(|_| bad_cursor())
}

fn bad_cursor() -> StoreError {
    StoreError::InvalidCursor
}

/// `s` with the characters `SCAN`'s glob gives a meaning escaped.
fn glob_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}
