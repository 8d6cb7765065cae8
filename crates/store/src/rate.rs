//! Rate limits shared by every replica: GCRA buckets (generic cell rate algorithm) kept in the
//! store, checked all or nothing per request (see `lua/ratelimit.lua`, which this module's
//! [`admit_at`] mirrors for the memory store).
//!
//! Invariant: a request refused by one bucket is charged to none; a bucket's state is one
//! number (its theoretical arrival time), gone once that time has passed.

use std::time::Duration;

/// One bucket a request is charged to: `burst` requests at once, then one per `interval`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's name within its scope (e.g. `calls`, `tasks:github`).
    pub name: String,
    /// Time between two requests at the sustained rate (at least 1 µs).
    pub interval: Duration,
    /// Requests admitted at once (at least 1).
    pub burst: u32,
    /// Soft: past its burst the bucket keeps admitting, up to as many again, and advises
    /// the caller how long it should have waited; only beyond that does it refuse.
    pub soft: bool,
}

impl Bucket {
    /// A bucket of `per_minute` requests a minute with `burst` at once (both at least 1).
    pub fn per_minute(name: String, per_minute: u64, burst: u64, soft: bool) -> Self {
        let per_minute = per_minute.max(1);
        let micros = (60_000_000 / per_minute).max(1);
        Self {
            name,
            interval: Duration::from_micros(micros),
            burst: u32::try_from(burst.max(1)).unwrap_or(u32::MAX),
            soft,
        }
    }

    /// The emission interval, tolerance and hard tolerance in µs (the script's arguments).
    pub(crate) fn micros(&self) -> (u64, u64, u64) {
        let interval = u64::try_from(self.interval.as_micros()).unwrap_or(u64::MAX).max(1);
        let tolerance = interval.saturating_mul(u64::from(self.burst));
        let hard = if self.soft { tolerance.saturating_mul(2) } else { tolerance };
        (interval, tolerance, hard)
    }
}

/// What the buckets said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Admitted; `advice` is how much sooner than the soft buckets allow the request came
    /// (zero when it came in time).
    Admitted {
        /// How long the caller should wait before its next request.
        advice: Duration,
    },
    /// Refused by the bucket at `bucket` (an index into the checked buckets); nothing was
    /// charged.
    Refused {
        /// Which bucket refused.
        bucket: usize,
        /// When the request would be admitted.
        retry_after: Duration,
    },
}

/// The memory store's admission: `tats` holds each bucket's theoretical arrival time (µs,
/// same clock as `now`), updated only when every bucket admits.
pub(crate) fn admit_at(now: u64, buckets: &[Bucket], tats: &mut [u64]) -> Admission {
    let mut next = Vec::with_capacity(buckets.len());
    let mut advice = 0;
    for (i, bucket) in buckets.iter().enumerate() {
        let (interval, tolerance, hard) = bucket.micros();
        let next_tat = tats[i].max(now).saturating_add(interval);
        let ahead = next_tat - now;
        if ahead > hard {
            return Admission::Refused { bucket: i, retry_after: Duration::from_micros(ahead - hard) };
        }
        advice = advice.max(ahead.saturating_sub(tolerance));
        next.push(next_tat);
    }
    tats.copy_from_slice(&next);
    Admission::Admitted { advice: Duration::from_micros(advice) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bucket(per_minute: u64, burst: u64, soft: bool) -> Bucket {
        Bucket::per_minute("b".to_owned(), per_minute, burst, soft)
    }

    #[test]
    fn a_strict_bucket_admits_its_burst_then_one_per_interval() {
        let b = [bucket(60, 3, false)];
        let mut tats = [0];
        let t0 = 1_000_000_000;
        for _ in 0..3 {
            assert_eq!(admit_at(t0, &b, &mut tats), Admission::Admitted { advice: Duration::ZERO });
        }
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Refused { bucket: 0, retry_after: Duration::from_secs(1) });
        // Half a second later it is still half a second early.
        assert_eq!(
            admit_at(t0 + 500_000, &b, &mut tats),
            Admission::Refused { bucket: 0, retry_after: Duration::from_millis(500) }
        );
        assert_eq!(admit_at(t0 + 1_000_000, &b, &mut tats), Admission::Admitted { advice: Duration::ZERO });
    }

    #[test]
    fn a_refusal_charges_no_bucket() {
        let b = [bucket(60, 5, false), bucket(60, 1, false)];
        let mut tats = [0, 0];
        let t0 = 1_000_000_000;
        assert!(matches!(admit_at(t0, &b, &mut tats), Admission::Admitted { .. }));
        let before = tats;
        assert!(matches!(admit_at(t0, &b, &mut tats), Admission::Refused { bucket: 1, .. }));
        assert_eq!(tats, before, "the first bucket was not charged for a refused request");
    }

    #[test]
    fn a_soft_bucket_advises_before_it_refuses() {
        let b = [bucket(60, 2, true)];
        let mut tats = [0];
        let t0 = 1_000_000_000;
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Admitted { advice: Duration::ZERO });
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Admitted { advice: Duration::ZERO });
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Admitted { advice: Duration::from_secs(1) });
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Admitted { advice: Duration::from_secs(2) });
        assert_eq!(admit_at(t0, &b, &mut tats), Admission::Refused { bucket: 0, retry_after: Duration::from_secs(1) });
    }

    #[test]
    fn rates_and_bursts_are_at_least_one() {
        let b = bucket(0, 0, false);
        assert_eq!(b.burst, 1);
        assert_eq!(b.interval, Duration::from_secs(60));
        assert_eq!(bucket(u64::MAX, 1, false).interval, Duration::from_micros(1));
    }
}
