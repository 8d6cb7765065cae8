//! The fleet's heartbeats in the in-process store: the same contract as Redis's, for one
//! replica (and tests).
//!
//! Invariant: each method runs under one lock and drops lapsed records first, as
//! `heartbeat.lua` does.

use std::collections::BTreeMap;
use std::sync::PoisonError;
use std::time::Duration;

use super::MemoryStore;
use crate::clock::{millis, now_ms};
use crate::contract::Fleet;
use crate::error::StoreError;
use crate::fleet::{Heartbeat, MAX_REPLICAS};

/// Replica id → (its heartbeat, when it lapses, Unix ms).
pub(super) type FleetState = BTreeMap<String, (Heartbeat, u64)>;

impl MemoryStore {
    fn live_fleet<T>(&self, f: impl FnOnce(&mut FleetState, u64) -> T) -> T {
        let mut all = self.fleet.lock().unwrap_or_else(PoisonError::into_inner);
        let now = now_ms();
        all.retain(|_, (_, expiry)| *expiry > now);
        f(&mut all, now)
    }
}

impl Fleet for MemoryStore {
    async fn beat(&self, beat: &Heartbeat, live: Duration) -> Result<bool, StoreError> {
        let beat = beat.bounded();
        Ok(self.live_fleet(|all, now| {
            if !all.contains_key(&beat.replica) && all.len() >= MAX_REPLICAS {
                return false;
            }
            let expiry = now.saturating_add(millis(live));
            all.insert(beat.replica.clone(), (Heartbeat { written_ms: now, ..beat }, expiry));
            true
        }))
    }

    async fn fleet(&self) -> Result<Vec<Heartbeat>, StoreError> {
        Ok(self.live_fleet(|all, _| all.values().take(MAX_REPLICAS).map(|(beat, _)| beat.clone()).collect()))
    }

    async fn leave(&self, replica: &str) -> Result<(), StoreError> {
        self.live_fleet(|all, _| all.remove(replica));
        Ok(())
    }
}
