//! Text encoding of a sealed token: `<version>.<keyId>.<base64url body>`. No crypto here.
//!
//! Invariant: `split` accepts exactly three dot-separated parts with non-empty key id and
//! body; everything else is `Malformed`.

use crate::error::OpenFailure;

/// The only format version.
pub(crate) const VERSION: &str = "v1";

/// Splits a token into version, key id and body without decoding anything.
pub(crate) fn split(token: &str) -> Result<(&str, &str, &str), OpenFailure> {
    let mut parts = token.splitn(3, '.');
    let (Some(version), Some(key_id), Some(body)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(OpenFailure::Malformed);
    };
    if key_id.is_empty() || body.is_empty() || body.contains('.') {
        return Err(OpenFailure::Malformed);
    }
    Ok((version, key_id, body))
}
