//! Writes that must reach Redis replicas before they are answered (`store.replicas_ack`).
//! Redis replicates asynchronously: a write the primary applied can vanish when the primary
//! dies before a replica got it, and a failover then promotes a replica without it. So a
//! relied-on write is followed by `WAIT n timeout` on the same connection, in the same
//! pipeline (one round trip): `WAIT` counts the replicas that acknowledged everything this
//! connection wrote so far, so it must follow the write on the socket that carried it (a
//! fresh connection's `WAIT` acknowledges nothing it wrote). In a cluster the pipeline goes to
//! the node owning the script's slot (redis-rs routes a pipeline by its first keyed command;
//! the keyless `WAIT` follows it), and `WAIT` counts that node's replicas.
//!
//! The relied-on writes: a task's (creation, claim, input request, answer, settle, cancel),
//! the vault's (a connection's or a registration's write, its deletes: a lost one brings back
//! a revoked credential or a user's disconnect, or loses a rotated refresh token, whose old
//! one is then spent again), and the single-use marks of connect links, flow states and
//! single-use `requestState` (a lost one lets a spent one be replayed).
//!
//! Between a script and `WAIT` goes one write of a per-shard marker key (same slot): a
//! script's answer may rest on data it did not write itself (the idempotent "this task
//! exists" of a repeated creation, a repeated settle that finds its outcome recorded, a
//! vault compare-and-set that finds another version), and `WAIT` only covers what this
//! connection wrote. The marker's write is replicated after everything the script read, so
//! once replicas acknowledge it they hold that too. A single command (`command_acked`: the
//! single-use mark's `SET NX`) needs none: what it answers without writing is a refusal
//! ("already used"), which is safe whether or not a replica holds the mark that caused it.
//!
//! Invariant: with `replicas_ack` = 0 nothing changes (no `WAIT`, no extra command); with
//! n > 0 a relied-on write is answered as a success only once n replicas hold it, otherwise
//! as [`StoreError::NotAcknowledged`] (the write may have landed: every task write is safe
//! to repeat, and the repeat waits again; a vault write or a single-use mark is not repeated
//! by the store, and its caller treats it as failed: the mark as spent, the vault entry as
//! whatever the next read finds).
//!
//! A connection blocked in `WAIT` is not read from by Redis until the `WAIT` returns, so
//! every command pipelined behind it waits too: waited writes run on connections of their own
//! (see `Lane`), and renewals, reads and reclaims never queue behind a missing replica.
//!
//! `WAITAOF` (Redis 7.2+) is not used: it also needs the AOF enabled on every replica, and
//! what guards against a failover is the replicas holding the write in memory, which `WAIT`
//! confirms; the Redis this project targets (7.0) does not have it anyway.

use redis::{ErrorKind, ServerErrorKind, Value};

use super::{Lane, RedisStore, Retry};
use crate::clock::millis;
use crate::error::StoreError;

impl RedisStore {
    /// Invokes `script` (whose write a client or a worker relies on) and, with
    /// `replicas_ack` > 0, waits in the same round trip until that many replicas hold it.
    pub(super) async fn script_acked(
        &self,
        retry: Retry,
        script: &'static redis::Script,
        keys: Vec<String>,
        args: Vec<String>,
    ) -> Result<Value, StoreError> {
        let Some((wanted, wait)) = self.inner.ack else {
            return self.script(retry, script, keys, args).await;
        };
        let mut evalsha = redis::cmd("EVALSHA");
        evalsha.arg(script.get_hash()).arg(keys.len()).arg(&keys).arg(&args);
        let mut pipe = redis::pipe();
        pipe.add_command(evalsha)
            .cmd("SET")
            .arg(marker(keys.first().map_or("", String::as_str)))
            .arg(1)
            .ignore()
            .cmd("WAIT")
            .arg(wanted)
            .arg(millis(wait));
        let (value, got): (Value, i64) = self
            .call_on(Lane::Acked, retry, &(pipe, script), |conn, (pipe, script)| {
                Box::pin(async move {
                    match pipe.query_async(&mut *conn).await {
                        // Redis lost its scripts (restart, failover to a replica that never
                        // loaded them): load, then send the write and its WAIT again. The
                        // script did not run, so repeating it is safe.
                        Err(e) if e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
                            script.load_async(&mut *conn).await?;
                            pipe.query_async(&mut *conn).await
                        }
                        other => other,
                    }
                })
            })
            .await?;
        let got = u32::try_from(got).unwrap_or(0);
        if got < wanted {
            return Err(StoreError::NotAcknowledged { wanted, got });
        }
        Ok(value)
    }

    /// Sends `cmd` (one command, whose write a client relies on) and, with `replicas_ack`
    /// > 0, waits in the same round trip until that many replicas hold what it wrote.
    pub(super) async fn command_acked<T: redis::FromRedisValue + Send + 'static>(
        &self,
        retry: Retry,
        cmd: redis::Cmd,
    ) -> Result<T, StoreError> {
        let Some((wanted, wait)) = self.inner.ack else {
            return self.call(retry, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await;
        };
        let mut pipe = redis::pipe();
        pipe.add_command(cmd).cmd("WAIT").arg(wanted).arg(millis(wait));
        let (value, got): (T, i64) =
            self.call_on(Lane::Acked, retry, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
        let got = u32::try_from(got).unwrap_or(0);
        if got < wanted {
            return Err(StoreError::NotAcknowledged { wanted, got });
        }
        Ok(value)
    }
}

/// The acknowledgement marker in the slot of `key` (`<prefix>:{<prefix>:<shard>}:acked`).
fn marker(key: &str) -> String {
    match key.find('}') {
        Some(close) => format!("{}:acked", &key[..=close]),
        None => format!("{key}:acked"),
    }
}
