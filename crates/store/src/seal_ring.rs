//! What the store knows of the fleet's seal key rings: each live replica records its own
//! (key ids and fingerprints, never a key), so a replica starting with keys that cannot open
//! what the fleet seals learns it before serving anything (see `AnyStore::check_seal_ring`).
//!
//! Threat model: this is a guard against misconfiguration, not against an attacker. Someone
//! who can write to Redis can forge or remove records (making a replica refuse to start, or
//! start with a wrong ring, which then fails exactly as it would without the check); a
//! record shows which key ids the fleet uses and a fingerprint of each, a MAC from which
//! nothing of a key can be learned.

/// A key of this replica's ring as recorded for the fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingKey {
    /// Its id (`[A-Za-z0-9_-]`, as the seal crate checks it).
    pub id: String,
    /// Its fingerprint (lowercase hex).
    pub fingerprint: String,
}

/// What is checked and recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingStep {
    /// At start-up: record this ring unless another live replica holds one of its key ids
    /// with another key or seals with a key it lacks.
    Check,
    /// While running: record this ring again (a record lapses unless refreshed).
    Refresh,
    /// When stopping: remove this replica's record.
    Forget,
}

/// A disagreement between this replica's ring and a live replica's.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingConflict {
    /// A live replica holds this key id with another key: tokens sealed under the id by
    /// one do not open on the other.
    OtherKey {
        /// The key id.
        key_id: String,
    },
    /// A live replica seals with this key, which this ring lacks: this replica cannot open
    /// what it seals.
    Missing {
        /// The key id.
        key_id: String,
    },
    /// This ring seals with a key no other live replica holds: they cannot open what this
    /// replica seals (a rotation that moved a new key first before every replica held it).
    Unknown {
        /// The key id.
        key_id: String,
    },
}

impl RingConflict {
    /// Whether the replica must not start: it could not read what the fleet writes (a
    /// conflict the other way, `Unknown`, is what a one-replica rotation looks like for a
    /// moment, and is only warned about).
    pub fn refuses(&self) -> bool {
        !matches!(self, Self::Unknown { .. })
    }
}
