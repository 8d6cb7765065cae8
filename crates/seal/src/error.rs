//! The one error type of the seal crate.
//!
//! Invariant: the `Display` of an open failure never says why it failed; the reason is a
//! separate field meant for logs only.

/// Why sealing or opening failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SealError {
    /// A token did not open. Deliberately opaque towards clients; log `reason`.
    #[error("invalid sealed value")]
    Invalid {
        /// The precise reason, for logs and metrics only.
        reason: OpenFailure,
    },
    /// The payload would make a token longer than the configured limit.
    #[error("sealed value would be {size} bytes, over the limit of {max} bytes")]
    TooLarge {
        /// Token length the payload would produce.
        size: usize,
        /// The limit.
        max: usize,
    },
    /// A configured key is unusable (the key bytes are never included).
    #[error("invalid sealing key {}: {problem}", name_key(key_id, *position))]
    InvalidKey {
        /// The key id as configured (empty when the entry has none).
        key_id: String,
        /// Its place in the configured list, from 1 (0 when not from a list).
        position: usize,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The operating system's random number generator failed.
    #[error("the operating system random number generator failed")]
    Random {
        /// What the generator said.
        #[source]
        source: getrandom::Error,
    },
}

/// A key as an error names it: its id, and its place in the list (the one thing to go by
/// when the entry has no id; the entry itself may be the secret and is never shown).
fn name_key(key_id: &str, position: usize) -> String {
    match (key_id.is_empty(), position) {
        (false, 0) => format!("{key_id:?}"),
        (false, n) => format!("{key_id:?} (entry {n})"),
        (true, 0) => "(no key id)".to_owned(),
        (true, n) => format!("entry {n} (no key id)"),
    }
}

impl SealError {
    /// The open-failure reason, if this is one.
    pub fn open_failure(&self) -> Option<OpenFailure> {
        match self {
            Self::Invalid { reason } => Some(*reason),
            _ => None,
        }
    }
}

/// Why a token did not open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpenFailure {
    /// Longer than the configured limit (checked before any decoding work).
    TooLong,
    /// Not `<version>.<keyId>.<body>`, bad base64, or too short.
    Malformed,
    /// A format version this build does not know.
    UnsupportedVersion,
    /// No key in the ring has this id (retired key, or forged id).
    UnknownKey,
    /// Authentication failed: tampered bytes, or minted for another purpose, principal,
    /// method or context.
    Integrity,
    /// Authentic but past its expiry.
    Expired,
    /// Authentic and current, but single-use and already used (found by the caller, which
    /// keeps the record of used tokens; the sealer itself never says this).
    Replayed,
}

impl OpenFailure {
    /// A short label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooLong => "too_long",
            Self::Malformed => "malformed",
            Self::UnsupportedVersion => "unsupported_version",
            Self::UnknownKey => "unknown_key",
            Self::Integrity => "integrity",
            Self::Expired => "expired",
            Self::Replayed => "replayed",
        }
    }
}

impl From<OpenFailure> for SealError {
    fn from(reason: OpenFailure) -> Self {
        Self::Invalid { reason }
    }
}
