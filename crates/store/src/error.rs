//! The one error type of the store crate.
//!
//! Invariant: callers see whether a failure is the backend being unreachable or slow (retry
//! later, "task store unavailable") or data that cannot be read (a bug or corruption); the
//! backend's own message goes to the log through `detail`.

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or refused the command.
    #[error("task store unavailable: {detail}")]
    Unavailable {
        /// What happened, for the log.
        detail: String,
    },
    /// The backend did not answer within the command timeout.
    #[error("task store timed out after {millis} ms")]
    Timeout {
        /// The timeout.
        millis: u64,
    },
    /// The write landed on the Redis primary but fewer replicas than `store.replicas_ack`
    /// confirmed it in time: the primary's death could still lose it, so it is not answered
    /// as a success. Retrying a task write is safe (creation is idempotent by key; a settle
    /// repeats with the same lease), and the retry waits again; a vault write or a
    /// single-use mark is not retried (the mark counts as spent).
    #[error("task store write not acknowledged by enough replicas: wanted {wanted}, got {got}")]
    NotAcknowledged {
        /// Replicas asked for.
        wanted: u32,
        /// Replicas that confirmed the write within the timeout.
        got: u32,
    },
    /// The backend answered with something this build cannot read.
    #[error("task store returned unexpected data: {detail}")]
    Corrupt {
        /// What was unexpected.
        detail: String,
    },
    /// The caller is at one of its quotas: nothing was created.
    #[error("quota exceeded: at most {max} {} per caller", kind.describe())]
    QuotaExceeded {
        /// Which quota.
        kind: crate::quota::QuotaKind,
        /// Its size.
        max: u64,
        /// When a place frees up, if known (the oldest retained task's expiry).
        retry_after_ms: Option<u64>,
    },
    /// A payload field kept encrypted at rest could not be sealed, or a stored one did not
    /// open (tampered with, or sealed with a key no longer in the ring).
    #[error("task {field} could not be {action}: {reason}")]
    Sealing {
        /// The record field.
        field: String,
        /// `sealed` or `opened`.
        action: &'static str,
        /// Why, without any of the value.
        reason: String,
    },
    /// A scan cursor that no scan handed out.
    #[error("invalid scan cursor")]
    InvalidCursor,
    /// A vault key's scope or name that cannot be kept (empty, over 2048 bytes, or holding NUL).
    #[error("invalid vault key")]
    InvalidVaultKey,
    /// The store could not be set up (start-up only).
    #[error("task store configuration: {detail}")]
    Config {
        /// What is wrong.
        detail: String,
    },
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        Self::Unavailable { detail: e.to_string() }
    }
}
