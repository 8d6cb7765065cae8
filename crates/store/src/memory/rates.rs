//! The memory store's rate-limit buckets: each bucket's theoretical arrival time by scope and
//! name, in one process.
//!
//! Invariant: bounded by the buckets in use: once the table has doubled since its last prune,
//! the buckets whose time has passed (which hold no state a fresh bucket would not) are
//! dropped.

use std::collections::HashMap;

use crate::rate::{Admission, Bucket, admit_at};

/// Buckets by (scope, name).
#[derive(Default)]
pub(super) struct Rates {
    tats: HashMap<(String, String), u64>,
    /// The table's size after its last prune.
    pruned_at: usize,
}

/// Size below which the table is never pruned.
const PRUNE_FLOOR: usize = 1024;

impl Rates {
    /// Charges one request of `scope` to `buckets`, all or nothing, at `now` (µs).
    pub(super) fn admit(&mut self, scope: &str, buckets: &[Bucket], now: u64) -> Admission {
        if self.tats.len() >= PRUNE_FLOOR.max(self.pruned_at.saturating_mul(2)) {
            self.tats.retain(|_, tat| *tat > now);
            self.pruned_at = self.tats.len();
        }
        let mut tats: Vec<u64> =
            buckets.iter().map(|b| self.tats.get(&(scope.to_owned(), b.name.clone())).copied().unwrap_or(0)).collect();
        let admission = admit_at(now, buckets, &mut tats);
        if matches!(admission, Admission::Admitted { .. }) {
            for (bucket, tat) in buckets.iter().zip(tats) {
                self.tats.insert((scope.to_owned(), bucket.name.clone()), tat);
            }
        }
        admission
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_buckets_are_pruned() {
        let mut rates = Rates::default();
        let bucket = [Bucket::per_minute("calls".to_owned(), 60_000, 1, false)];
        for i in 0..PRUNE_FLOOR {
            rates.admit(&format!("p{i}"), &bucket, 1_000_000);
        }
        assert_eq!(rates.tats.len(), PRUNE_FLOOR);
        // A second later every bucket's time (1 ms ahead) has passed: the next call prunes.
        rates.admit("late", &bucket, 2_000_000);
        assert_eq!(rates.tats.len(), 1);
    }

    #[test]
    fn scopes_do_not_share_buckets() {
        let mut rates = Rates::default();
        let bucket = [Bucket::per_minute("calls".to_owned(), 1, 1, false)];
        assert!(matches!(rates.admit("a", &bucket, 1_000_000), Admission::Admitted { .. }));
        assert!(matches!(rates.admit("a", &bucket, 1_000_000), Admission::Refused { .. }));
        assert!(matches!(rates.admit("b", &bucket, 1_000_000), Admission::Admitted { .. }));
    }
}
