//! The vault and locks of the in-process store: the same contract as Redis's, for one replica.
//!
//! Invariant: entries sort by kind, scope and name (a page continues after its last member);
//! a lock past its time to live is free.

use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;
use std::time::Duration;

use super::MemoryStore;
use crate::clock::now_ms;
use crate::contract::{Locks, Vault};
use crate::error::StoreError;
use crate::vault::{
    Expect, Put, VaultEntry, VaultKey, VaultKind, VaultListing, VaultPage, member, split_member, valid_part,
};

impl MemoryStore {
    fn vault<T>(&self, f: impl FnOnce(&mut VaultState, u64) -> T) -> T {
        f(&mut self.vault.lock().unwrap_or_else(PoisonError::into_inner), now_ms())
    }
}

fn checked(key: &VaultKey) -> Result<&VaultKey, StoreError> {
    if valid_part(&key.scope) && valid_part(&key.name) { Ok(key) } else { Err(StoreError::InvalidVaultKey) }
}

impl Vault for MemoryStore {
    async fn vault_get(&self, key: &VaultKey) -> Result<Option<VaultEntry>, StoreError> {
        let key = checked(key)?;
        Ok(self.vault(|v, _| v.get(key)))
    }

    async fn vault_put(&self, key: &VaultKey, value: &str, meta: &str, expect: Expect) -> Result<Put, StoreError> {
        let key = checked(key)?;
        Ok(self.vault(|v, now| v.put(key, value, meta, expect, now)))
    }

    async fn vault_delete(&self, key: &VaultKey) -> Result<bool, StoreError> {
        let key = checked(key)?;
        Ok(self.vault(|v, _| v.delete(key)))
    }

    async fn vault_delete_version(&self, key: &VaultKey, version: u64) -> Result<bool, StoreError> {
        let key = checked(key)?;
        Ok(self.vault(|v, _| v.delete_version(key, version)))
    }

    async fn vault_list(
        &self,
        kind: VaultKind,
        scope: Option<&str>,
        cursor: Option<&str>,
        limit: usize,
    ) -> Result<VaultPage, StoreError> {
        Ok(self.vault(|v, _| v.list(kind, scope, cursor, limit)))
    }
}

impl Locks for MemoryStore {
    async fn try_lock(&self, name: &str, holder: &str, ttl: Duration) -> Result<bool, StoreError> {
        let ttl = crate::clock::millis(ttl);
        Ok(self.vault(|v, now| v.try_lock(name, holder, now.saturating_add(ttl), now)))
    }

    async fn unlock(&self, name: &str, holder: &str) -> Result<bool, StoreError> {
        Ok(self.vault(|v, now| v.unlock(name, holder, now)))
    }
}

/// Entries and locks.
#[derive(Default)]
pub(super) struct VaultState {
    entries: BTreeMap<(VaultKind, String), VaultEntry>,
    locks: HashMap<String, (String, u64)>,
    /// The last version given: versions never repeat, not even for a key written anew.
    last_version: u64,
}

impl VaultState {
    pub(super) fn get(&self, key: &VaultKey) -> Option<VaultEntry> {
        self.entries.get(&(key.kind, member(&key.scope, &key.name))).cloned()
    }

    pub(super) fn put(&mut self, key: &VaultKey, value: &str, meta: &str, expect: Expect, now: u64) -> Put {
        let slot = (key.kind, member(&key.scope, &key.name));
        let current = self.entries.get(&slot).map(|e| e.version);
        let as_expected = match expect {
            Expect::Absent => current.is_none(),
            Expect::Version(v) => current == Some(v),
            Expect::Any => true,
        };
        if !as_expected {
            return Put::Conflict { current };
        }
        self.last_version += 1;
        let version = self.last_version;
        self.entries
            .insert(slot, VaultEntry { value: value.to_owned(), meta: meta.to_owned(), version, updated_ms: now });
        Put::Saved { version }
    }

    pub(super) fn delete(&mut self, key: &VaultKey) -> bool {
        self.entries.remove(&(key.kind, member(&key.scope, &key.name))).is_some()
    }

    pub(super) fn delete_version(&mut self, key: &VaultKey, version: u64) -> bool {
        let slot = (key.kind, member(&key.scope, &key.name));
        if self.entries.get(&slot).is_some_and(|e| e.version == version) {
            self.entries.remove(&slot);
            return true;
        }
        false
    }

    pub(super) fn list(&self, kind: VaultKind, scope: Option<&str>, cursor: Option<&str>, limit: usize) -> VaultPage {
        let in_scope = |m: &str| scope.is_none_or(|s| split_member(m).is_some_and(|(have, _)| have == s));
        let mut entries: Vec<VaultListing> = self
            .entries
            .iter()
            .filter(|((k, m), _)| *k == kind && cursor.is_none_or(|c| m.as_str() > c) && in_scope(m))
            .take(limit.saturating_add(1))
            .filter_map(|((_, m), e)| {
                let (scope, name) = split_member(m)?;
                Some(VaultListing {
                    scope: scope.to_owned(),
                    name: name.to_owned(),
                    meta: e.meta.clone(),
                    version: e.version,
                    updated_ms: e.updated_ms,
                })
            })
            .collect();
        let next = (entries.len() > limit).then(|| {
            entries.truncate(limit);
            entries.last().map(|l| member(&l.scope, &l.name)).unwrap_or_default()
        });
        VaultPage { entries, next }
    }

    pub(super) fn try_lock(&mut self, name: &str, holder: &str, until: u64, now: u64) -> bool {
        match self.locks.get(name) {
            Some((_, expires)) if *expires > now => false,
            _ => {
                self.locks.insert(name.to_owned(), (holder.to_owned(), until));
                true
            }
        }
    }

    pub(super) fn unlock(&mut self, name: &str, holder: &str, now: u64) -> bool {
        match self.locks.get(name) {
            Some((h, expires)) if h == holder && *expires > now => {
                self.locks.remove(name);
                true
            }
            _ => false,
        }
    }
}
