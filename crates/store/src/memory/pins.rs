//! Pinned tool definitions in the in-process store: the same contract as Redis's, for one
//! replica.
//!
//! Invariant: each method runs under one lock, so it is as atomic as its Lua counterpart.

use std::collections::{BTreeMap, HashMap};
use std::sync::PoisonError;

use super::MemoryStore;
use crate::contract::Pins;
use crate::error::StoreError;
use crate::pins::{Approval, Approved, MAX_PINNED_TOOLS, Observation, Observed, Withheld, kept_definition};

/// One upstream's pins.
#[derive(Debug, Default)]
pub(super) struct UpstreamPins {
    /// Tool → (approved hash, approved definition).
    approved: BTreeMap<String, (String, String)>,
    /// Tool → (latest seen hash, definition), for the tools withheld at the last observation.
    seen: BTreeMap<String, (String, String)>,
    /// Whether first-seen seeding happened (or anything was ever approved).
    seeded: bool,
}

/// Every upstream's pins.
pub(super) type PinsState = HashMap<String, UpstreamPins>;

impl MemoryStore {
    fn pins<T>(&self, upstream: &str, f: impl FnOnce(&mut UpstreamPins) -> T) -> T {
        let mut all = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        f(all.entry(upstream.to_owned()).or_default())
    }
}

fn approved_hashes(pins: &UpstreamPins) -> Approved {
    pins.approved.iter().map(|(tool, (hash, _))| (tool.clone(), hash.clone())).collect()
}

impl Pins for MemoryStore {
    async fn pins_observe(&self, upstream: &str, seed: bool, tools: &[Observed]) -> Result<Observation, StoreError> {
        Ok(self.pins(upstream, |pins| {
            let seeded = seed && !pins.seeded && pins.approved.is_empty();
            if seeded {
                for t in tools.iter().filter(|t| !t.hash.is_empty()).take(MAX_PINNED_TOOLS) {
                    pins.approved.insert(t.tool.clone(), (t.hash.clone(), kept_definition(&t.definition)));
                }
                pins.seeded = true;
            }
            pins.seen.clear();
            // Changed tools (with an approved hash) first, then new ones, as in pin_observe.lua.
            let (changed, new): (Vec<&Observed>, Vec<&Observed>) =
                tools.iter().partition(|t| pins.approved.contains_key(&t.tool));
            for t in changed.into_iter().chain(new) {
                let approved = pins.approved.get(&t.tool).is_some_and(|(hash, _)| *hash == t.hash);
                if !approved && pins.seen.len() < MAX_PINNED_TOOLS {
                    pins.seen.insert(t.tool.clone(), (t.hash.clone(), kept_definition(&t.definition)));
                }
            }
            Observation { approved: approved_hashes(pins), seeded }
        }))
    }

    async fn pins_approved(&self, upstream: &str) -> Result<Approved, StoreError> {
        Ok(self.pins(upstream, |pins| approved_hashes(pins)))
    }

    async fn pins_withheld(&self, upstream: &str) -> Result<Vec<Withheld>, StoreError> {
        Ok(self.pins(upstream, |pins| {
            pins.seen
                .iter()
                .map(|(tool, (hash, definition))| {
                    let approved = pins.approved.get(tool);
                    Withheld {
                        tool: tool.clone(),
                        hash: hash.clone(),
                        definition: definition.clone(),
                        approved_hash: approved.map(|(h, _)| h.clone()),
                        approved_definition: approved.map(|(_, d)| d.clone()),
                    }
                })
                .collect()
        }))
    }

    async fn pins_approve(&self, upstream: &str, tool: &str, hash: &str) -> Result<Approval, StoreError> {
        Ok(self.pins(upstream, |pins| {
            if hash.is_empty() {
                // A stub (a definition over the observer's bound) is never approved.
                return Approval::Stale {
                    current: pins.seen.get(tool).map(|(h, _)| h.clone()).filter(|h| !h.is_empty()),
                };
            }
            let Some((seen_hash, _)) = pins.seen.get(tool) else {
                return if pins.approved.get(tool).is_some_and(|(h, _)| h == hash) {
                    Approval::Approved
                } else {
                    Approval::Stale { current: None }
                };
            };
            if seen_hash != hash {
                return Approval::Stale { current: Some(seen_hash.clone()) };
            }
            if !pins.approved.contains_key(tool) && pins.approved.len() >= MAX_PINNED_TOOLS {
                return Approval::Full;
            }
            if let Some(entry) = pins.seen.remove(tool) {
                pins.approved.insert(tool.to_owned(), entry);
            }
            pins.seeded = true;
            Approval::Approved
        }))
    }
}
