//! Per-principal slots of a replica-wide budget: how many long-lived requests of one kind are
//! open on this replica, in all and per principal, so one caller cannot hold every slot of a
//! replica. Two budgets use it: listen streams (`subscriptions/listen`, legacy GET streams;
//! `http.max_listeners`, `http.max_listeners_per_principal`) and legacy `tasks/result`
//! waiters (`tasks.max_result_waiters`, `tasks.max_result_waiters_per_principal`).
//!
//! Threat model: one authenticated caller opening long waits until the replica refuses
//! everyone's (503). Invariant: a slot is owned by its request's task and given back when that
//! task ends, however it ends (the slot releases on drop); a principal's entry goes away with
//! its last slot, so the map holds no more entries than slots are taken.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;

/// A replica's budget of slots of one kind.
#[derive(Debug)]
pub(crate) struct PrincipalSlots {
    /// The replica's slots (`total` holds this many permits when none is taken).
    max: usize,
    total: Arc<Semaphore>,
    per_principal: Arc<Mutex<HashMap<String, u64>>>,
    max_per_principal: u64,
    /// The refusal of a principal at its own limit (given that limit).
    refusal: fn(u64) -> GatewayError,
}

/// One open request's claim on the budget.
#[derive(Debug)]
pub(crate) struct PrincipalSlot {
    _total: OwnedSemaphorePermit,
    principal: String,
    per_principal: Arc<Mutex<HashMap<String, u64>>>,
}

impl PrincipalSlots {
    /// A budget of `max` slots, at most `max_per_principal` of them one principal's, who is
    /// then refused with `refusal(max_per_principal)`.
    pub(crate) fn new(max: u64, max_per_principal: u64, refusal: fn(u64) -> GatewayError) -> Self {
        let max = usize::try_from(max).unwrap_or(Semaphore::MAX_PERMITS).min(Semaphore::MAX_PERMITS);
        Self {
            max,
            total: Arc::new(Semaphore::new(max)),
            per_principal: Arc::new(Mutex::new(HashMap::new())),
            max_per_principal,
            refusal,
        }
    }

    /// The listen-stream budget: 429 [`GatewayError::TooManyListeners`] past a principal's share.
    pub(crate) fn listeners(max: u64, max_per_principal: u64) -> Self {
        Self::new(max, max_per_principal, |max| GatewayError::TooManyListeners { max })
    }

    /// The `tasks/result` budget: 429 [`GatewayError::TooManyResultWaiters`] past a
    /// principal's share.
    pub(crate) fn result_waiters(max: u64, max_per_principal: u64) -> Self {
        Self::new(max, max_per_principal, |max| GatewayError::TooManyResultWaiters { max })
    }

    /// A slot for `principal` (its store key), or 429 (its own limit) / 503 (the replica's).
    pub(crate) fn acquire(&self, principal: &str) -> Result<PrincipalSlot, GatewayError> {
        let total = self.total.clone().try_acquire_owned().map_err(|_| GatewayError::Overloaded)?;
        let mut map = self.per_principal.lock().unwrap_or_else(PoisonError::into_inner);
        let held = map.entry(principal.to_owned()).or_insert(0);
        if *held >= self.max_per_principal {
            return Err((self.refusal)(self.max_per_principal));
        }
        *held += 1;
        Ok(PrincipalSlot { _total: total, principal: principal.to_owned(), per_principal: self.per_principal.clone() })
    }

    /// Slots taken now, by every principal.
    pub(crate) fn held(&self) -> usize {
        self.max.saturating_sub(self.total.available_permits())
    }
}

impl Drop for PrincipalSlot {
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
        let listeners = PrincipalSlots::listeners(3, 2);
        let a1 = listeners.acquire("a").expect("first");
        let _a2 = listeners.acquire("a").expect("second");
        assert!(matches!(listeners.acquire("a"), Err(GatewayError::TooManyListeners { max: 2 })));
        let _b1 = listeners.acquire("b").expect("another principal");
        assert!(matches!(listeners.acquire("c"), Err(GatewayError::Overloaded)), "replica budget spent");
        drop(a1);
        let _a3 = listeners.acquire("a").expect("a slot came back");
        assert_eq!(listeners.per_principal.lock().expect("lock").get("a"), Some(&2));
    }

    #[test]
    fn waiters_are_refused_with_their_own_error_and_leave_no_entry_behind() {
        let waiters = PrincipalSlots::result_waiters(4, 1);
        let a = waiters.acquire("a").expect("first");
        assert!(matches!(waiters.acquire("a"), Err(GatewayError::TooManyResultWaiters { max: 1 })));
        drop(a);
        assert!(waiters.per_principal.lock().expect("lock").is_empty());
    }
}
