//! Short digests of names the gateway derives from users and servers (store lock names,
//! redirect URI tags): no principal or issuer in clear where a digest does.
//!
//! Invariant: parts are length-prefixed, so no two different lists of parts share a digest by
//! how they split.

use sha2::{Digest as _, Sha256};

/// A short hex digest (128 bits) of `parts`.
pub(super) fn digest(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(u64::try_from(part.len()).unwrap_or(u64::MAX).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hasher.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}
