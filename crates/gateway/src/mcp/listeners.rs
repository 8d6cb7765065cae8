//! Listen-stream slots: how many long-lived notification streams (`subscriptions/listen`, and
//! legacy GET streams) are open on this replica, in all and per principal, so one caller
//! cannot hold every connection of a replica open.
//!
//! Invariant: a slot is owned by its stream's task and given back when that task ends, however
//! it ends (the slot releases on drop); a principal's entry goes away with its last slot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;

/// The replica's listen-stream budget.
#[derive(Debug)]
pub struct Listeners {
    total: Arc<Semaphore>,
    per_principal: Arc<Mutex<HashMap<String, u64>>>,
    max_per_principal: u64,
}

/// One open stream's claim on the budget.
#[derive(Debug)]
pub struct ListenSlot {
    _total: OwnedSemaphorePermit,
    principal: String,
    per_principal: Arc<Mutex<HashMap<String, u64>>>,
}

impl Listeners {
    /// A budget of `max` streams, at most `max_per_principal` of them one principal's.
    pub fn new(max: u64, max_per_principal: u64) -> Self {
        let max = usize::try_from(max).unwrap_or(Semaphore::MAX_PERMITS).min(Semaphore::MAX_PERMITS);
        Self {
            total: Arc::new(Semaphore::new(max)),
            per_principal: Arc::new(Mutex::new(HashMap::new())),
            max_per_principal,
        }
    }

    /// A slot for `principal` (its store key), or 429 (its own limit) / 503 (the replica's).
    pub fn acquire(&self, principal: &str) -> Result<ListenSlot, GatewayError> {
        let total = self.total.clone().try_acquire_owned().map_err(|_| GatewayError::Overloaded)?;
        let mut map = self.per_principal.lock().unwrap_or_else(PoisonError::into_inner);
        let held = map.entry(principal.to_owned()).or_insert(0);
        if *held >= self.max_per_principal {
            return Err(GatewayError::TooManyListeners { max: self.max_per_principal });
        }
        *held += 1;
        Ok(ListenSlot { _total: total, principal: principal.to_owned(), per_principal: self.per_principal.clone() })
    }
}

impl Drop for ListenSlot {
    fn drop(&mut self) {
        let mut map = self.per_principal.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = map.get_mut(&self.principal) {
            *held = held.saturating_sub(1);
            if *held == 0 {
                map.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_principal_has_its_own_limit_within_the_replicas() {
        let listeners = Listeners::new(3, 2);
        let a1 = listeners.acquire("a").expect("first");
        let _a2 = listeners.acquire("a").expect("second");
        assert!(matches!(listeners.acquire("a"), Err(GatewayError::TooManyListeners { max: 2 })));
        let _b1 = listeners.acquire("b").expect("another principal");
        assert!(matches!(listeners.acquire("c"), Err(GatewayError::Overloaded)), "replica budget spent");
        drop(a1);
        let _a3 = listeners.acquire("a").expect("a slot came back");
        assert_eq!(listeners.per_principal.lock().expect("lock").get("a"), Some(&2));
    }
}
