//! The exchanged tokens of one upstream, per replica: keyed by the SHA-256 of the caller's
//! token (the caller's token itself is never kept), each until shortly before it expires.
//!
//! Invariants: never more than `max` entries (past it, expired entries go first, then the
//! oldest); an expired entry is never handed out.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::time::Instant;

/// The SHA-256 of a caller's token.
pub(crate) type Key = [u8; 32];

/// How long a token whose answer gave no `expires_in` is kept.
const DEFAULT_LIFETIME: Duration = Duration::from_secs(60);
/// How long before its expiry a token stops being handed out (clock skew, a request in flight).
const SKEW: Duration = Duration::from_secs(30);
/// Longest a token is kept, whatever its `expires_in` (a revoked grant is noticed within it).
const MAX_LIFETIME: Duration = Duration::from_secs(3600);

/// The cache key of a caller's token.
pub(crate) fn key_of(token: &str) -> Key {
    Sha256::digest(token.as_bytes()).into()
}

/// How long a token may be kept given its `expires_in` (zero: not at all).
pub(crate) fn lifetime(expires_in: Option<u64>) -> Duration {
    match expires_in {
        None => DEFAULT_LIFETIME,
        Some(secs) => Duration::from_secs(secs).saturating_sub(SKEW).min(MAX_LIFETIME),
    }
}

/// A token issued for an upstream: what its requests carry as `Authorization: Bearer`.
/// `Debug` prints `[redacted]`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct UpstreamToken(Arc<str>);

impl UpstreamToken {
    pub(crate) fn new(token: &str) -> Self {
        Self(Arc::from(token))
    }

    /// The token, for the `Authorization` header.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for UpstreamToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

struct Entry {
    token: UpstreamToken,
    expires: Instant,
    /// Its place in `TokenCache::order` (a key stored again gets a new one).
    seq: u64,
}

/// Exchanged tokens by caller token, bounded.
pub(crate) struct TokenCache {
    max: usize,
    entries: HashMap<Key, Entry>,
    /// Keys in the order they were stored, with the `seq` they were stored with; an element
    /// whose entry has since gone or been stored again is skipped when met.
    order: VecDeque<(Key, u64)>,
    next_seq: u64,
}

impl TokenCache {
    pub(crate) fn new(max: usize) -> Self {
        Self { max: max.max(1), entries: HashMap::new(), order: VecDeque::new(), next_seq: 0 }
    }

    /// The token stored for `key`, unless it expired (it is then dropped).
    pub(crate) fn get(&mut self, key: &Key, now: Instant) -> Option<UpstreamToken> {
        match self.entries.get(key) {
            Some(entry) if entry.expires > now => Some(entry.token.clone()),
            Some(_) => {
                self.entries.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `token` for `key` until `expires`, making room when full.
    pub(crate) fn insert(&mut self, key: Key, token: UpstreamToken, expires: Instant, now: Instant) {
        if !self.entries.contains_key(&key) && self.entries.len() >= self.max {
            self.entries.retain(|_, e| e.expires > now);
            while self.entries.len() >= self.max {
                let Some((oldest, seq)) = self.order.pop_front() else { break };
                if self.entries.get(&oldest).is_some_and(|e| e.seq == seq) {
                    self.entries.remove(&oldest);
                }
            }
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(key, Entry { token, expires, seq });
        self.order.push_back((key, seq));
        // Keys stored again (or dropped on expiry) leave stale elements behind: compact now
        // and then, so the queue stays within a small multiple of the entries.
        if self.order.len() > 2 * self.max + 64 {
            let entries = &self.entries;
            self.order.retain(|(key, seq)| entries.get(key).is_some_and(|e| e.seq == *seq));
        }
    }

    /// Entries stored (expired ones not yet dropped included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(n: u32) -> UpstreamToken {
        UpstreamToken::new(&format!("t{n}"))
    }

    #[test]
    fn lifetimes_keep_a_margin_and_a_cap() {
        assert_eq!(lifetime(None), Duration::from_secs(60));
        assert_eq!(lifetime(Some(300)), Duration::from_secs(270));
        assert_eq!(lifetime(Some(20)), Duration::ZERO, "too short to keep");
        assert_eq!(lifetime(Some(86_400)), MAX_LIFETIME);
    }

    #[test]
    fn keys_are_digests_not_tokens() {
        let key = key_of("secret-token");
        assert_eq!(key.len(), 32);
        assert_ne!(key, key_of("secret-token2"));
        assert!(!format!("{:?}", token(1)).contains("t1"));
    }

    #[tokio::test(start_paused = true)]
    async fn entries_expire() {
        let mut cache = TokenCache::new(10);
        let now = Instant::now();
        cache.insert(key_of("a"), token(1), now + Duration::from_secs(5), now);
        assert_eq!(cache.get(&key_of("a"), Instant::now()), Some(token(1)));
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(cache.get(&key_of("a"), Instant::now()), None, "not at its expiry");
        assert_eq!(cache.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_cache_drops_expired_entries_first_then_the_oldest() {
        let mut cache = TokenCache::new(3);
        let now = Instant::now();
        let long = now + Duration::from_secs(100);
        cache.insert(key_of("a"), token(1), long, now);
        cache.insert(key_of("b"), token(2), now + Duration::from_secs(1), now);
        cache.insert(key_of("c"), token(3), long, now);
        let later = now + Duration::from_secs(2);
        // b expired: it goes, a (the oldest) stays.
        cache.insert(key_of("d"), token(4), long, later);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key_of("a"), later), Some(token(1)));
        assert_eq!(cache.get(&key_of("b"), later), None);
        // None expired: the oldest (a) goes.
        cache.insert(key_of("e"), token(5), long, later);
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&key_of("a"), later), None);
        for (k, t) in [("c", 3), ("d", 4), ("e", 5)] {
            assert_eq!(cache.get(&key_of(k), later), Some(token(t)), "{k}");
        }
        // Storing a key again refreshes it in place and makes it the newest.
        cache.insert(key_of("c"), token(6), long, later);
        cache.insert(key_of("f"), token(7), long, later);
        assert_eq!(cache.get(&key_of("c"), later), Some(token(6)));
        assert_eq!(cache.get(&key_of("d"), later), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_order_queue_stays_bounded() {
        let mut cache = TokenCache::new(2);
        let now = Instant::now();
        for n in 0..1000 {
            cache.insert(key_of("same"), token(n), now + Duration::from_secs(100), now);
        }
        assert!(cache.order.len() <= 2 * 2 + 65, "{}", cache.order.len());
        assert_eq!(cache.len(), 1);
    }
}
