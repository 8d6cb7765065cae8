//! The store's clock: this replica's Unix time, read from the system, and the one conversion of
//! a `Duration` to the whole milliseconds the store counts in.
//!
//! Both backends read it: the embedded store for every lifetime, lease and window; the Redis
//! store only for this replica's own guesses (when its cache of finished records lets an
//! entry go, which leases to look at in a sweep). What replicas must agree on, the Redis
//! scripts time by Redis's clock (`now_ms()` in `lua/prelude.lua`), never by this one.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Unix time in milliseconds (0 before the epoch).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, millis)
}

/// Unix time in microseconds (0 before the epoch): the rate limits' unit.
pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// `d` in whole milliseconds, saturating.
pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
