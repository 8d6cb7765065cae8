//! Sealing and opening: AES-256-GCM with a random 96-bit nonce per token, the binding as
//! associated data and the expiry inside the plaintext.
//!
//! Invariants: a token opens only with a key of the ring, only in the binding it was sealed
//! with, and only until its expiry; the length limit is checked before any decoding work, so
//! an oversized input costs nothing.

use std::sync::Arc;

use aes_gcm::aead::AeadInOut;
use aes_gcm::{Nonce, Tag};
use base64::Engine as _;
use base64::engine::Simd;
use base64::engine::general_purpose::{NO_PAD, URL_SAFE_NO_PAD};
use rand::RngExt as _;

use crate::binding::Binding;
use crate::error::{OpenFailure, SealError};
use crate::format::{VERSION, split};
use crate::key::KeyRing;

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
const EXPIRY_LEN: usize = 8;

/// Default upper bound on a token's length in bytes.
pub const DEFAULT_MAX_TOKEN_LEN: usize = 16 * 1024;

/// Seals and opens tokens with one key ring.
#[derive(Debug)]
pub struct Sealer {
    ring: Arc<KeyRing>,
    max_token_len: usize,
    // SIMD base64 (chosen once for this CPU): a third of the scalar engine's cost per token.
    base64: Simd,
}

impl Sealer {
    /// A sealer whose tokens are at most `max_token_len` bytes long.
    pub fn new(ring: KeyRing, max_token_len: usize) -> Self {
        Self { ring: Arc::new(ring), max_token_len, base64: Simd::url_safe(NO_PAD) }
    }

    /// A sealer with the same key ring (shared, so a rotation is one configuration) and another
    /// length limit.
    pub fn with_max_len(&self, max_token_len: usize) -> Self {
        Self { ring: self.ring.clone(), max_token_len, base64: self.base64.clone() }
    }

    /// The key ring.
    pub fn ring(&self) -> &KeyRing {
        &self.ring
    }

    /// Seals `payload` for `binding`, valid until `expires_at_ms` (Unix ms).
    pub fn seal(&self, binding: &Binding<'_>, expires_at_ms: u64, payload: &[u8]) -> Result<String, SealError> {
        let key = self.ring.sealing_key();
        let raw_len = NONCE_LEN + EXPIRY_LEN + payload.len() + TAG_LEN;
        let token_len =
            VERSION.len() + 1 + key.id.as_str().len() + 1 + base64::encoded_len(raw_len, false).unwrap_or(usize::MAX);
        if token_len > self.max_token_len {
            return Err(SealError::TooLarge { size: token_len, max: self.max_token_len });
        }

        // A fresh random 96-bit nonce from the thread's CSPRNG (ChaCha, seeded and reseeded
        // from the OS): collisions are negligible at this size and it costs no system call.
        let nonce: [u8; NONCE_LEN] = rand::rng().random();
        let mut raw = Vec::with_capacity(raw_len);
        raw.extend_from_slice(&nonce);
        raw.extend_from_slice(&expires_at_ms.to_be_bytes());
        raw.extend_from_slice(payload);

        let mut aad = Vec::with_capacity(128 + binding.principal.len() + binding.method.len());
        binding.write_aad(VERSION, key.id.as_str(), &mut aad);
        let tag = key
            .cipher
            .encrypt_inout_detached(&Nonce::from(nonce), &aad, raw[NONCE_LEN..].as_mut().into())
            .map_err(|_| SealError::TooLarge { size: token_len, max: self.max_token_len })?;
        raw.extend_from_slice(&tag);

        let mut token = String::with_capacity(token_len);
        token.push_str(VERSION);
        token.push('.');
        token.push_str(key.id.as_str());
        token.push('.');
        self.base64.encode_string(&raw, &mut token);
        Ok(token)
    }

    /// Opens `token` in `binding` at time `now_ms` (Unix ms) and returns the payload.
    pub fn open(&self, binding: &Binding<'_>, now_ms: u64, token: &str) -> Result<Vec<u8>, SealError> {
        if token.len() > self.max_token_len {
            return Err(OpenFailure::TooLong.into());
        }
        let (version, key_id, body) = split(token)?;
        if version != VERSION {
            return Err(OpenFailure::UnsupportedVersion.into());
        }
        let key = self.ring.find(key_id).ok_or(OpenFailure::UnknownKey)?;
        let mut raw = self.base64.decode(body).map_err(|_| OpenFailure::Malformed)?;
        if raw.len() < NONCE_LEN + EXPIRY_LEN + TAG_LEN {
            return Err(OpenFailure::Malformed.into());
        }

        let mut aad = Vec::with_capacity(128 + binding.principal.len() + binding.method.len());
        binding.write_aad(VERSION, key_id, &mut aad);
        let tag_at = raw.len() - TAG_LEN;
        let (head, tag) = raw.split_at_mut(tag_at);
        let (nonce, ciphertext) = head.split_at_mut(NONCE_LEN);
        let nonce = Nonce::try_from(&*nonce).map_err(|_| OpenFailure::Malformed)?;
        let tag = Tag::try_from(&*tag).map_err(|_| OpenFailure::Malformed)?;
        key.cipher.decrypt_inout_detached(&nonce, &aad, ciphertext.into(), &tag).map_err(|_| OpenFailure::Integrity)?;

        let mut expiry = [0u8; EXPIRY_LEN];
        expiry.copy_from_slice(&raw[NONCE_LEN..NONCE_LEN + EXPIRY_LEN]);
        if now_ms > u64::from_be_bytes(expiry) {
            return Err(OpenFailure::Expired.into());
        }
        raw.truncate(tag_at);
        raw.drain(..NONCE_LEN + EXPIRY_LEN);
        Ok(raw)
    }

    /// The nonce of a well-formed token (its unique identity), for single-use bookkeeping.
    /// Does not authenticate: call it only on a token that [`Sealer::open`] accepted.
    pub fn nonce_of(token: &str) -> Option<[u8; NONCE_LEN]> {
        let (_, _, body) = split(token).ok()?;
        // 16 base64 characters carry 12 bytes exactly.
        let prefix = body.get(..16)?;
        let bytes = URL_SAFE_NO_PAD.decode(prefix).ok()?;
        bytes.try_into().ok()
    }
}
