//! The one error type of the store crate.
//!
//! Invariant: callers see whether a failure is the backend being unreachable or slow (retry
//! later, "task store unavailable") or data that cannot be read (a bug or corruption); the
//! backend's own error (a Redis, TLS or JSON error) is kept as the source, so a log that
//! prints the chain shows it and a caller can walk to it. The store's own text (`detail`)
//! says what failed at the store's level and never repeats the source's. Neither holds a
//! secret: no error here is made from a Redis URL, and redis-rs's errors do not print the
//! URL they were given (nor its password).

use std::sync::Arc;

use mcpgate_seal::SealError;

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The backend could not be reached or refused the command.
    #[error("task store unavailable: {detail}")]
    Unavailable {
        /// What failed, in the store's words.
        detail: String,
        /// The backend's error behind it (e.g. a `redis::RedisError`), when there was one.
        #[source]
        source: Option<Cause>,
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
        /// The decoding error behind it, when there was one.
        #[source]
        source: Option<Cause>,
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
        /// Why, in the store's words, without any of the value.
        reason: String,
        /// The seal error behind it, when there was one (its text is opaque by design; the
        /// precise reason of a failed open is in `reason`).
        #[source]
        source: Option<Box<SealError>>,
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
        /// The error behind it (a Redis URL or TLS setting refused), when there was one.
        #[source]
        source: Option<Cause>,
    },
}

impl StoreError {
    /// [`StoreError::Unavailable`] with no error behind it.
    pub(crate) fn unavailable(detail: impl Into<String>) -> Self {
        Self::Unavailable { detail: detail.into(), source: None }
    }

    /// [`StoreError::Unavailable`] because of `source`.
    pub(crate) fn unavailable_caused(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Unavailable { detail: detail.into(), source: Some(Cause::new(source)) }
    }

    /// [`StoreError::Corrupt`] with no error behind it.
    pub(crate) fn corrupt(detail: impl Into<String>) -> Self {
        Self::Corrupt { detail: detail.into(), source: None }
    }

    /// [`StoreError::Corrupt`] because of `source`.
    pub(crate) fn corrupt_caused(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Corrupt { detail: detail.into(), source: Some(Cause::new(source)) }
    }

    /// [`StoreError::Config`] with no error behind it.
    pub(crate) fn config(detail: impl Into<String>) -> Self {
        Self::Config { detail: detail.into(), source: None }
    }

    /// [`StoreError::Config`] because of `source`.
    pub(crate) fn config_caused(
        detail: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Self::Config { detail: detail.into(), source: Some(Cause::new(source)) }
    }
}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        Self::unavailable_caused("the Redis call failed", e)
    }
}

/// The error behind a [`StoreError`] (a Redis, TLS or JSON error), shared so that
/// `StoreError` stays `Clone`.
///
/// It is not an error itself but derefs to the one it holds, so a [`StoreError`]'s
/// [`source`](std::error::Error::source) is that error, and walking the chain downcasts to
/// it (e.g. to `redis::RedisError`). Two causes are equal when they print the same text.
#[derive(Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// Keeps `error`.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }
}

impl std::ops::Deref for Cause {
    type Target = dyn std::error::Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl std::fmt::Debug for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.0, f)
    }
}

impl std::fmt::Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Display::fmt(&*self.0, f)
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for Cause {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_is_the_kept_error_itself() {
        let redis = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        let error = StoreError::from(redis);
        let source = std::error::Error::source(&error).expect("a source");
        assert!(source.downcast_ref::<redis::RedisError>().is_some(), "{source:?}");
        assert_eq!(error.to_string(), "task store unavailable: the Redis call failed");
        assert_eq!(error.clone(), error);
    }

    #[test]
    fn a_redis_url_error_does_not_print_the_url_or_its_password() {
        use redis::IntoConnectionInfo as _;
        for url in ["redis://user:hunter2@host:6379/x", "redis://:hunter2@host:notaport", "rediss://u:hunter2@h#nope"] {
            let e = url.into_connection_info().expect_err("refused");
            let error = StoreError::config_caused("invalid Redis URL", e);
            let mut chain = format!("{error} {error:?}");
            let mut next = std::error::Error::source(&error);
            while let Some(cause) = next {
                chain.push_str(&format!(" {cause} {cause:?}"));
                next = cause.source();
            }
            assert!(!chain.contains("hunter2"), "{chain}");
        }
    }
}
