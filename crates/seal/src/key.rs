//! Sealing keys and the key ring: the first key seals, every key opens, so keys rotate with
//! zero downtime (add the new key second everywhere, then move it first, then drop the old).
//!
//! Invariants: a ring is never empty and key ids are unique; key bytes are zeroized after the
//! cipher is built and never appear in `Debug` output or errors.

use std::fmt;

use aes_gcm::{Aes256Gcm, Key, KeyInit};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
use zeroize::Zeroizing;

use crate::error::SealError;

/// Longest key id accepted.
const MAX_KEY_ID_LEN: usize = 32;

/// A key id: 1–32 characters of `[A-Za-z0-9_-]` (it appears in every token).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct KeyId(String);

impl KeyId {
    /// Validates a key id.
    pub fn new(id: &str) -> Result<Self, SealError> {
        let valid_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if id.is_empty() || id.len() > MAX_KEY_ID_LEN || !id.chars().all(valid_char) {
            return Err(SealError::InvalidKey {
                key_id: id.chars().take(MAX_KEY_ID_LEN).collect(),
                problem: "key id must be 1-32 characters of A-Z, a-z, 0-9, '-' or '_'",
            });
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

pub(crate) struct RingKey {
    pub(crate) id: KeyId,
    pub(crate) cipher: Aes256Gcm,
}

/// An ordered, non-empty set of AES-256 keys.
pub struct KeyRing {
    keys: Vec<RingKey>,
}

impl KeyRing {
    /// Builds a ring from `(id, 32 key bytes)` pairs; the first seals.
    pub fn new(keys: Vec<(KeyId, Zeroizing<[u8; 32]>)>) -> Result<Self, SealError> {
        if keys.is_empty() {
            return Err(SealError::InvalidKey { key_id: String::new(), problem: "the key ring is empty" });
        }
        let mut ring = Vec::with_capacity(keys.len());
        for (id, bytes) in keys {
            if ring.iter().any(|k: &RingKey| k.id == id) {
                return Err(SealError::InvalidKey { key_id: id.0, problem: "duplicate key id" });
            }
            let key = Key::<Aes256Gcm>::from(*bytes);
            ring.push(RingKey { id, cipher: Aes256Gcm::new(&key) });
        }
        Ok(Self { keys: ring })
    }

    /// Parses `kid:base64` specs (standard or URL-safe base64 of exactly 32 bytes).
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Self, SealError> {
        let mut keys = Vec::with_capacity(specs.len());
        for spec in specs {
            let spec = spec.as_ref().trim();
            let Some((id, b64)) = spec.split_once(':') else {
                return Err(SealError::InvalidKey {
                    key_id: String::new(),
                    problem: "expected <key id>:<base64 of 32 bytes>",
                });
            };
            let id = KeyId::new(id.trim())?;
            let b64 = b64.trim();
            let decoded = Zeroizing::new(
                [STANDARD, URL_SAFE, URL_SAFE_NO_PAD].iter().find_map(|engine| engine.decode(b64).ok()).ok_or_else(
                    || SealError::InvalidKey { key_id: id.0.clone(), problem: "key is not valid base64" },
                )?,
            );
            let bytes: [u8; 32] = decoded.as_slice().try_into().map_err(|_| SealError::InvalidKey {
                key_id: id.0.clone(),
                problem: "key must decode to exactly 32 bytes (e.g. `openssl rand -base64 32`)",
            })?;
            keys.push((id, Zeroizing::new(bytes)));
        }
        Self::new(keys)
    }

    /// A ring with one fresh random key, for a single process that shares tokens with nobody.
    pub fn generate(id: &str) -> Result<Self, SealError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        getrandom::fill(bytes.as_mut_slice()).map_err(|source| SealError::Random { source })?;
        Self::new(vec![(KeyId::new(id)?, bytes)])
    }

    /// Key ids in ring order (the first seals).
    pub fn key_ids(&self) -> impl Iterator<Item = &KeyId> {
        self.keys.iter().map(|k| &k.id)
    }

    pub(crate) fn sealing_key(&self) -> &RingKey {
        &self.keys[0]
    }

    pub(crate) fn find(&self, id: &str) -> Option<&RingKey> {
        self.keys.iter().find(|k| k.id.as_str() == id)
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeyRing").field("key_ids", &self.key_ids().collect::<Vec<_>>()).finish_non_exhaustive()
    }
}
