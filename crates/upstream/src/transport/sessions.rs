//! Where an HTTP upstream's sessions live: one shared by every caller, or, for an
//! `auth = "oauth"` upstream, one per principal — a 2025-era `Mcp-Session-Id` belongs to the
//! user whose token opened it, so no caller's request ever travels on another's session.
//!
//! Invariants: a holder's slot is never handed to another holder; at most `max` per-principal
//! slots are kept (past it, slots idle longer than `idle` go first, then the least recently
//! used), so a replica serving many users holds a bounded number of upstream sessions.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// One session slot: empty until a handshake fills it.
pub(crate) type Slot<S> = Arc<tokio::sync::Mutex<Option<Arc<S>>>>;

/// The session slots of one upstream.
pub(crate) struct Sessions<S> {
    shared: Slot<S>,
    /// `Some` for an upstream whose requests carry each caller's own token.
    per_principal: Option<Mutex<HashMap<Arc<str>, Held<S>>>>,
    max: usize,
    idle: Duration,
}

struct Held<S> {
    slot: Slot<S>,
    used: Instant,
}

impl<S> Sessions<S> {
    /// One session for every caller.
    pub(crate) fn shared() -> Self {
        Self { shared: Slot::default(), per_principal: None, max: 0, idle: Duration::ZERO }
    }

    /// One session per principal, at most `max` kept, those idle past `idle` dropped first.
    pub(crate) fn per_principal(max: usize, idle: Duration) -> Self {
        Self { shared: Slot::default(), per_principal: Some(Mutex::default()), max: max.max(1), idle }
    }

    /// The slot of `holder` (a principal key): its own when sessions are per principal, else
    /// the shared one. A request made for nobody in particular (`None`) gets the shared slot.
    pub(crate) fn slot(&self, holder: Option<&str>) -> Slot<S> {
        let (Some(map), Some(holder)) = (&self.per_principal, holder) else { return Arc::clone(&self.shared) };
        let now = Instant::now();
        let mut map = map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(held) = map.get_mut(holder) {
            held.used = now;
            return Arc::clone(&held.slot);
        }
        if map.len() >= self.max {
            let idle = self.idle;
            map.retain(|_, held| now.saturating_duration_since(held.used) < idle);
        }
        if map.len() >= self.max
            && let Some(oldest) = map.iter().min_by_key(|(_, held)| held.used).map(|(k, _)| Arc::clone(k))
        {
            map.remove(&oldest);
        }
        let slot = Slot::default();
        map.insert(Arc::from(holder), Held { slot: Arc::clone(&slot), used: now });
        slot
    }

    /// How many per-principal slots are kept.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.per_principal.as_ref().map_or(0, |m| m.lock().unwrap_or_else(PoisonError::into_inner).len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn each_principal_has_its_own_slot_and_the_kept_ones_are_bounded() {
        let sessions: Sessions<u32> = Sessions::per_principal(2, Duration::from_secs(60));
        let alice = sessions.slot(Some("alice"));
        *alice.lock().await = Some(Arc::new(1));
        assert!(sessions.slot(Some("bob")).lock().await.is_none(), "bob never sees alice's session");
        assert!(Arc::ptr_eq(&alice, &sessions.slot(Some("alice"))));
        tokio::time::advance(Duration::from_secs(1)).await;
        // Alice used last: bob's slot is the least recently used and goes when carol comes.
        let _ = sessions.slot(Some("alice"));
        let _ = sessions.slot(Some("carol"));
        assert_eq!(sessions.held(), 2);
        assert!(Arc::ptr_eq(&alice, &sessions.slot(Some("alice"))), "alice kept");
        // Past the idle time both go at once when a new principal needs room.
        tokio::time::advance(Duration::from_secs(61)).await;
        let _ = sessions.slot(Some("dave"));
        assert_eq!(sessions.held(), 1);
        assert!(!Arc::ptr_eq(&alice, &sessions.slot(Some("alice"))), "an idle session was dropped");
    }

    #[tokio::test]
    async fn a_shared_upstream_has_one_slot_for_everyone() {
        let sessions: Sessions<u32> = Sessions::shared();
        assert!(Arc::ptr_eq(&sessions.slot(Some("alice")), &sessions.slot(Some("bob"))));
        assert!(Arc::ptr_eq(&sessions.slot(None), &sessions.slot(Some("bob"))));
    }
}
