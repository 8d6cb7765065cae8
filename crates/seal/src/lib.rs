//! Sealing of small blobs the gateway hands to clients and must get back unchanged: MRTR
//! `requestState` and legacy `Mcp-Session-Id` values; and, with the same key ring, of task
//! payloads at rest ([`AtRest`]). Any replica holding the key ring can
//! open what any other replica sealed, so no server state is needed between rounds.
//!
//! Threat model: the client (or anyone on the path) is an attacker who may read, replay,
//! truncate, splice or forge tokens, and may present a token minted for another user, call,
//! or purpose. Sealing gives confidentiality and integrity (AES-256-GCM) and binds a token to
//! its purpose, principal, method and a caller-supplied context digest through associated data,
//! so a token opens only in the exact context it was minted for and only until its expiry.
//! It does not stop replay within that context and lifetime; callers that need single use
//! record the token's nonce elsewhere. Key material and plaintext never appear in `Debug`
//! output or error messages, and every open failure looks the same to the caller
//! ([`SealError::Invalid`]) while its [`OpenFailure`] reason is kept for logs.
//!
//! Wire format: `v1.<keyId>.<base64url(nonce[12] | ciphertext | tag[16])>`, where the
//! plaintext is `expiry_unix_ms (u64, big endian) | payload`.

mod at_rest;
mod binding;
mod error;
mod format;
mod key;
mod sealer;

pub use at_rest::{
    AtRest, Format as AtRestFormat, LEGACY_MARKER as AT_REST_LEGACY_MARKER, MARKER as AT_REST_MARKER, RecordBinding,
};
pub use binding::{Binding, Purpose, context_digest};
pub use error::{OpenFailure, SealError};
pub use key::{KeyId, KeyRing};
pub use sealer::{DEFAULT_MAX_TOKEN_LEN, Sealer};
