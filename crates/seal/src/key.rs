//! Sealing keys and the key ring: the first key seals, every key opens, so keys rotate with
//! zero downtime (add the new key second everywhere, then move it first, then drop the old).
//!
//! Invariants: a ring is never empty and key ids are unique; key bytes are zeroized after the
//! cipher is built and never appear in `Debug` output or errors.

use std::fmt;

use aes_gcm::{Aes256Gcm, Key, KeyInit};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE, URL_SAFE_NO_PAD};
use sha2::{Digest as _, Sha256};
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
                position: 0,
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
    /// See [`KeyRing::fingerprints`].
    fingerprint: [u8; FINGERPRINT_LEN],
}

/// Bytes of a key's fingerprint (128 bits: a collision between two random keys is not a
/// concern, and nothing of the key can be learned from it).
const FINGERPRINT_LEN: usize = 16;

/// What a fingerprint is the MAC of: a fixed label, so that it is not the MAC of anything
/// the gateway ever seals.
const FINGERPRINT_LABEL: &[u8] = b"mcpgate seal key fingerprint v1";

/// HMAC-SHA-256 (RFC 2104) keyed with a 32-byte key, which fits in one SHA-256 block.
fn hmac_sha256(key: &[u8; 32], message: &[u8]) -> [u8; 32] {
    let mut inner_pad = Zeroizing::new([0x36u8; 64]);
    let mut outer_pad = Zeroizing::new([0x5cu8; 64]);
    for (i, byte) in key.iter().enumerate() {
        inner_pad[i] ^= byte;
        outer_pad[i] ^= byte;
    }
    let inner = Sha256::new().chain_update(inner_pad.as_slice()).chain_update(message).finalize();
    let outer = Sha256::new().chain_update(outer_pad.as_slice()).chain_update(inner).finalize();
    outer.into()
}

/// An ordered, non-empty set of AES-256 keys.
pub struct KeyRing {
    keys: Vec<RingKey>,
}

impl KeyRing {
    /// Builds a ring from `(id, 32 key bytes)` pairs; the first seals.
    pub fn new(keys: Vec<(KeyId, Zeroizing<[u8; 32]>)>) -> Result<Self, SealError> {
        if keys.is_empty() {
            return Err(SealError::InvalidKey { key_id: String::new(), position: 0, problem: "the key ring is empty" });
        }
        let mut ring = Vec::with_capacity(keys.len());
        for (i, (id, bytes)) in keys.into_iter().enumerate() {
            if ring.iter().any(|k: &RingKey| k.id == id) {
                return Err(SealError::InvalidKey { key_id: id.0, position: i + 1, problem: "duplicate key id" });
            }
            let mac = hmac_sha256(&bytes, FINGERPRINT_LABEL);
            let mut fingerprint = [0u8; FINGERPRINT_LEN];
            fingerprint.copy_from_slice(&mac[..FINGERPRINT_LEN]);
            let key = Key::<Aes256Gcm>::from(*bytes);
            ring.push(RingKey { id, cipher: Aes256Gcm::new(&key), fingerprint });
        }
        Ok(Self { keys: ring })
    }

    /// Parses `kid:base64` specs (standard or URL-safe base64 of exactly 32 bytes).
    pub fn parse<S: AsRef<str>>(specs: &[S]) -> Result<Self, SealError> {
        let mut keys = Vec::with_capacity(specs.len());
        for (i, spec) in specs.iter().enumerate() {
            let position = i + 1;
            let spec = spec.as_ref().trim();
            let Some((id, b64)) = spec.split_once(':') else {
                return Err(SealError::InvalidKey {
                    key_id: String::new(),
                    position,
                    problem: "expected <key id>:<base64 of 32 bytes>",
                });
            };
            let id = KeyId::new(id.trim()).map_err(|e| match e {
                SealError::InvalidKey { key_id, problem, .. } => SealError::InvalidKey { key_id, position, problem },
                other => other,
            })?;
            let b64 = b64.trim();
            let decoded = Zeroizing::new(
                [STANDARD, URL_SAFE, URL_SAFE_NO_PAD].iter().find_map(|engine| engine.decode(b64).ok()).ok_or_else(
                    || SealError::InvalidKey { key_id: id.0.clone(), position, problem: "key is not valid base64" },
                )?,
            );
            let bytes: [u8; 32] = decoded.as_slice().try_into().map_err(|_| SealError::InvalidKey {
                key_id: id.0.clone(),
                position,
                problem: "key must decode to exactly 32 bytes",
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

    /// Each key's id and fingerprint (lowercase hex), in ring order: the first 128 bits of
    /// HMAC-SHA-256 keyed with the key over a fixed label. Two replicas compare fingerprints
    /// to learn whether they hold the same key under an id without showing each other (or
    /// the store they meet in) the key; the fingerprint reveals nothing of it.
    pub fn fingerprints(&self) -> impl Iterator<Item = (&KeyId, String)> {
        self.keys.iter().map(|k| (&k.id, k.fingerprint.iter().map(|b| format!("{b:02x}")).collect()))
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

#[cfg(test)]
mod tests {
    use super::{KeyRing, hmac_sha256};

    /// RFC 4231 test case 1 (a 20-byte key; HMAC pads any key to the block with zeros, so
    /// the same 20 bytes followed by 12 zeros give the same MAC).
    #[test]
    fn hmac_matches_rfc_4231() {
        let mut key = [0u8; 32];
        key[..20].fill(0x0b);
        let mac: String = hmac_sha256(&key, b"Hi There").iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(mac, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
    }

    #[test]
    fn fingerprints_tell_keys_apart_and_not_ids() {
        let a = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
        let b = "HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=";
        let ring = KeyRing::parse(&[format!("k1:{a}"), format!("k2:{a}"), format!("k3:{b}")]).expect("ring");
        let prints: Vec<(String, String)> = ring.fingerprints().map(|(id, fp)| (id.as_str().to_owned(), fp)).collect();
        assert_eq!(prints.len(), 3);
        assert_eq!(prints[0].1, prints[1].1, "the same key under two ids");
        assert_ne!(prints[0].1, prints[2].1);
        assert!(prints.iter().all(|(_, fp)| fp.len() == 32 && fp.bytes().all(|c| c.is_ascii_hexdigit())));
    }
}
