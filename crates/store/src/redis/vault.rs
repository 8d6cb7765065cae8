//! The vault and locks on Redis: each entry a hash beside its kind's index in one slot (so a
//! write and its index change are one script), listed by lex range over the index; locks are
//! `SET NX PX` strings released by their holder only.
//!
//! Invariant: every method is one round trip; a write is retried only when its repetition
//! changes nothing observable (a read, a delete, an unlock), never a compare-and-set (its
//! retry would conflict with its own first write). With `store.replicas_ack` > 0, an entry's
//! write and deletes are answered only once that many replicas hold them (`acked`): a
//! failover must not bring back a revoked credential or a user's disconnect, nor lose a
//! rotated refresh token. Locks are not waited for (a lock lost in a failover can let a
//! second replica refresh at once; the compare-and-set on versions keeps one result).

use std::time::Duration;

use redis::Value;

use super::{RedisStore, Retry, reply, scripts};
use crate::clock::millis;
use crate::contract::{Locks, Vault};
use crate::error::StoreError;
use crate::vault::{Expect, Put, VaultEntry, VaultKey, VaultKind, VaultListing, VaultPage, member, valid_part};

/// Listing pages are bounded whatever the caller asks.
const MAX_PAGE: usize = 500;

impl RedisStore {
    fn vault_keys(&self, key: &VaultKey) -> Result<(String, String, String), StoreError> {
        if !(valid_part(&key.scope) && valid_part(&key.name)) {
            return Err(StoreError::InvalidVaultKey);
        }
        let member = member(&key.scope, &key.name);
        let keys = &self.inner.keys;
        Ok((keys.vault_entry(key.kind.as_str(), &member), keys.vault_index(key.kind.as_str()), member))
    }
}

impl Vault for RedisStore {
    async fn vault_get(&self, key: &VaultKey) -> Result<Option<VaultEntry>, StoreError> {
        let (entry, _, _) = self.vault_keys(key)?;
        let mut cmd = redis::cmd("HMGET");
        cmd.arg(&entry).arg("value").arg("meta").arg("version").arg("updated");
        let fields: Vec<Option<String>> =
            self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        let [value, meta, version, updated] =
            <[Option<String>; 4]>::try_from(fields).map_err(|_| StoreError::corrupt("unexpected HMGET reply"))?;
        let (Some(value), Some(version)) = (value, version) else { return Ok(None) };
        let number = |s: Option<String>| s.and_then(|s| s.parse::<u64>().ok());
        let version =
            number(Some(version)).ok_or_else(|| StoreError::corrupt("a vault entry's version is not a number"))?;
        Ok(Some(VaultEntry {
            value,
            meta: meta.unwrap_or_default(),
            version,
            updated_ms: number(updated).unwrap_or(0),
        }))
    }

    async fn vault_put(&self, key: &VaultKey, value: &str, meta: &str, expect: Expect) -> Result<Put, StoreError> {
        let (entry, index, member) = self.vault_keys(key)?;
        let expect = match expect {
            Expect::Absent => "absent".to_owned(),
            Expect::Any => "any".to_owned(),
            Expect::Version(v) => v.to_string(),
        };
        let args = vec![value.to_owned(), meta.to_owned(), expect, member, key.scope.clone(), key.name.clone()];
        let sequence = self.inner.keys.vault_version();
        let out = reply(self.script_acked(Retry::No, &scripts::VAULT_PUT, vec![entry, index, sequence], args).await?)?;
        match out.as_slice() {
            [Value::Int(1), Value::Int(version)] => Ok(Put::Saved { version: u64::try_from(*version).unwrap_or(0) }),
            [Value::Int(0), Value::Int(found)] => {
                Ok(Put::Conflict { current: u64::try_from(*found).ok().filter(|v| *v > 0) })
            }
            other => Err(StoreError::corrupt(format!("unexpected vault_put reply {other:?}"))),
        }
    }

    async fn vault_delete(&self, key: &VaultKey) -> Result<bool, StoreError> {
        let (entry, index, member) = self.vault_keys(key)?;
        let out = self.script_acked(Retry::Yes, &scripts::VAULT_DELETE, vec![entry, index], vec![member]).await?;
        Ok(matches!(out, Value::Int(n) if n > 0))
    }

    async fn vault_delete_version(&self, key: &VaultKey, version: u64) -> Result<bool, StoreError> {
        let (entry, index, member) = self.vault_keys(key)?;
        let args = vec![member, version.to_string()];
        // Not retried: versions start again at 1 after a delete, so a retry after a lost reply
        // could remove an entry written anew in between.
        let out = self.script_acked(Retry::No, &scripts::VAULT_DELETE, vec![entry, index], args).await?;
        Ok(matches!(out, Value::Int(n) if n > 0))
    }

    async fn vault_list(
        &self,
        kind: VaultKind,
        scope: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<VaultPage, StoreError> {
        let limit = limit.clamp(1, MAX_PAGE);
        let keys = &self.inner.keys;
        let index = keys.vault_index(kind.as_str());
        // One scope's members lie between "<scope>\0" and "<scope>\x01".
        let low = match (cursor, scope) {
            (Some(c), _) => format!("({c}"),
            (None, Some(s)) => format!("[{s}\u{0}"),
            (None, None) => "-".to_owned(),
        };
        let high = scope.map_or_else(|| "+".to_owned(), |s| format!("({s}\u{1}"));
        let mut cmd = redis::cmd("ZRANGE");
        cmd.arg(&index).arg(&low).arg(&high).arg("BYLEX").arg("LIMIT").arg(0).arg(limit + 1);
        let mut members: Vec<String> = self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        let next = (members.len() > limit).then(|| {
            members.truncate(limit);
            members.last().cloned().unwrap_or_default()
        });
        let mut entries = Vec::with_capacity(members.len());
        if !members.is_empty() {
            let mut pipe = redis::pipe();
            for m in &members {
                pipe.cmd("HMGET")
                    .arg(keys.vault_entry(kind.as_str(), m))
                    .arg("scope")
                    .arg("name")
                    .arg("meta")
                    .arg("version")
                    .arg("updated");
            }
            let rows: Vec<Vec<Option<String>>> =
                self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
            for row in rows {
                let [scope, name, meta, version, updated] =
                    <[Option<String>; 5]>::try_from(row).map_err(|_| StoreError::corrupt("unexpected HMGET reply"))?;
                // An index member whose entry is gone (deleted between the two reads) is skipped.
                let (Some(scope), Some(name)) = (scope, name) else { continue };
                let number = |s: Option<String>| s.and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                entries.push(VaultListing {
                    scope,
                    name,
                    meta: meta.unwrap_or_default(),
                    version: number(version),
                    updated_ms: number(updated),
                });
            }
        }
        Ok(VaultPage { entries, next })
    }
}

impl Locks for RedisStore {
    async fn try_lock(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let mut cmd = redis::cmd("SET");
        cmd.arg(self.inner.keys.lock(name)).arg(holder).arg("NX").arg("PX").arg(millis(ttl).max(1));
        // Not retried: after a lost reply the retry would find our own lock and say "taken".
        let set: Option<String> = self.call(Retry::No, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await?;
        Ok(set.is_some())
    }

    async fn unlock(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        let key = self.inner.keys.lock(name);
        let out = self.script(Retry::Yes, &scripts::UNLOCK, vec![key], vec![holder.to_owned()]).await?;
        Ok(matches!(out, Value::Int(n) if n > 0))
    }
}
