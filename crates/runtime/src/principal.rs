//! The authenticated caller. Everything a caller owns (sessions, request state, tasks) is
//! bound to its principal key.
//!
//! Invariant: two principals are the same caller exactly when issuer and subject are equal
//! (and, for a narrowed principal, its scope); the key encodes both unambiguously
//! (length-prefixed issuer), so no pair of distinct (iss, sub) pairs maps to one key.
//!
//! A principal may carry the caller's [`Credential`] (the bearer token it presented), kept
//! only so an upstream configured for token exchange (RFC 8693) can swap it for a token of its
//! own; it is no part of equality or the key, and `Debug` never shows it.

use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// An authenticated caller: (issuer, subject) plus granted scopes.
#[derive(Clone, PartialEq, Eq)]
pub struct Principal(Arc<Inner>);

struct Inner {
    issuer: String,
    subject: String,
    key: String,
    scopes: Vec<String>,
    /// The token the caller presented (`None` for anonymous callers and for principals
    /// rebuilt from a stored task): not compared, never shown.
    credential: Option<Credential>,
    /// Every claim of the caller's token (`None` without a token): read by policy rules; no
    /// part of identity or equality, never persisted.
    claims: Option<Arc<serde_json::Map<String, serde_json::Value>>>,
}

// By hand: who the caller is, never which token it happened to present this time.
impl PartialEq for Inner {
    fn eq(&self, other: &Self) -> bool {
        self.issuer == other.issuer
            && self.subject == other.subject
            && self.key == other.key
            && self.scopes == other.scopes
    }
}

impl Eq for Inner {}

/// The raw bearer token a caller presented, kept to be exchanged for an upstream's own token
/// (RFC 8693), never forwarded as it is. `Debug` prints `[redacted]`; there is no `Display`
/// and no equality (nothing should compare or print it).
#[derive(Clone)]
pub struct Credential(Arc<str>);

impl Credential {
    /// Wraps a bearer token (without the `Bearer ` scheme).
    pub fn bearer(token: &str) -> Self {
        Self(Arc::from(token))
    }

    /// The token itself: only for the token exchange request (and a sealed task record).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Principal {
    /// A principal from token claims, without a credential.
    pub fn new(issuer: &str, subject: &str, scopes: Vec<String>) -> Self {
        Self::with_credential(issuer, subject, scopes, None)
    }

    /// A principal from token claims and the token it presented (`None` when there is none,
    /// e.g. a task run rebuilt from its record).
    pub fn with_credential(issuer: &str, subject: &str, scopes: Vec<String>, credential: Option<Credential>) -> Self {
        let key = format!("{}:{issuer}{subject}", issuer.len());
        Self(Arc::new(Inner {
            issuer: issuer.to_owned(),
            subject: subject.to_owned(),
            key,
            scopes,
            credential,
            claims: None,
        }))
    }

    /// This principal with every claim of its token (what policy rules read as
    /// `principal.claims`).
    pub fn with_claims(self, claims: serde_json::Map<String, serde_json::Value>) -> Self {
        let claims = Some(Arc::new(claims));
        match Arc::try_unwrap(self.0) {
            Ok(mut inner) => {
                inner.claims = claims;
                Self(Arc::new(inner))
            }
            Err(shared) => Self(Arc::new(Inner {
                issuer: shared.issuer.clone(),
                subject: shared.subject.clone(),
                key: shared.key.clone(),
                scopes: shared.scopes.clone(),
                credential: shared.credential.clone(),
                claims,
            })),
        }
    }

    /// Every claim of the caller's token, if it presented one.
    pub fn claims(&self) -> Option<&serde_json::Map<String, serde_json::Value>> {
        self.0.claims.as_deref()
    }

    /// The one principal of `auth.mode = none`.
    pub fn anonymous() -> Self {
        Self::new("", "anonymous", Vec::new())
    }

    /// This principal narrowed to one scope (under `auth.mode = none`, a legacy session): the
    /// same issuer, subject and scopes, but a key of its own, so what it owns is not the wider
    /// principal's. Narrowed keys begin with `s`, never a digit, so none equals a plain key.
    pub fn within(&self, scope: &[u8]) -> Self {
        let digest = Sha256::digest(scope);
        let mut key = String::with_capacity(2 + 32 + self.0.key.len());
        key.push('s');
        for b in &digest[..16] {
            let _ = write!(key, "{b:02x}");
        }
        key.push('/');
        key.push_str(&self.0.key);
        Self(Arc::new(Inner {
            issuer: self.0.issuer.clone(),
            subject: self.0.subject.clone(),
            key,
            scopes: self.0.scopes.clone(),
            credential: self.0.credential.clone(),
            claims: self.0.claims.clone(),
        }))
    }

    /// Token issuer (empty for anonymous).
    pub fn issuer(&self) -> &str {
        &self.0.issuer
    }

    /// Subject.
    pub fn subject(&self) -> &str {
        &self.0.subject
    }

    /// Granted scopes.
    pub fn scopes(&self) -> &[String] {
        &self.0.scopes
    }

    /// The bearer token the caller presented, if it presented one (see [`Credential`]).
    pub fn credential(&self) -> Option<&Credential> {
        self.0.credential.as_ref()
    }

    /// Stable, unambiguous key of (issuer, subject) used to bind owned state.
    pub fn key(&self) -> &str {
        &self.0.key
    }

    /// The key of (issuer, subject) itself, without the narrowing of [`Principal::within`]:
    /// what limits per caller count against.
    pub fn caller_key(&self) -> &str {
        match self.0.key.strip_prefix('s') {
            Some(narrowed) => narrowed.split_once('/').map_or(&self.0.key, |(_, wider)| wider),
            None => &self.0.key,
        }
    }

    /// Who a key made by [`Principal::key`] names, read back from the key alone (an operator
    /// looking at stored tasks knows callers by issuer and subject, not by key); `None` for a
    /// string no principal's key looks like.
    pub fn parse_key(key: &str) -> Option<KeyOwner<'_>> {
        let (narrowed, plain) = match key.strip_prefix('s') {
            Some(rest) => (true, rest.split_once('/')?.1),
            None => (false, key),
        };
        let (length, rest) = plain.split_once(':')?;
        if length.is_empty() || !length.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let length: usize = length.parse().ok()?;
        Some(KeyOwner { issuer: rest.get(..length)?, subject: rest.get(length..)?, narrowed })
    }

    /// A short pseudonymous id for logs (no subject in clear text).
    pub fn log_id(&self) -> String {
        let digest = Sha256::digest(self.0.key.as_bytes());
        digest[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The issuer and subject a principal key names (see [`Principal::parse_key`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyOwner<'a> {
    /// Token issuer (empty for anonymous).
    pub issuer: &'a str,
    /// Subject.
    pub subject: &'a str,
    /// Whether the key is narrowed to one scope (see [`Principal::within`]).
    pub narrowed: bool,
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal").field("id", &self.log_id()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::{Credential, KeyOwner, Principal};

    #[test]
    fn a_key_names_its_issuer_and_subject() {
        let owner = |issuer, subject, narrowed| Some(KeyOwner { issuer, subject, narrowed });
        let caller = Principal::new("https://auth.example:8443/t1", "12:carol", Vec::new());
        assert_eq!(Principal::parse_key(caller.key()), owner("https://auth.example:8443/t1", "12:carol", false));
        let narrowed = Principal::anonymous().within(b"session");
        assert_eq!(Principal::parse_key(narrowed.key()), owner("", "anonymous", true));
        for garbage in ["", "carol", "x:carol", "+3:abcd", "99:short", "s0123/", "sabc", "2:a\u{e9}b"] {
            assert_eq!(Principal::parse_key(garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn the_credential_is_no_part_of_identity_and_never_shown() {
        let with = Principal::with_credential("https://issuer/", "sub", Vec::new(), Some(Credential::bearer("t0ken")));
        let without = Principal::new("https://issuer/", "sub", Vec::new());
        assert_eq!(with, without);
        assert_eq!(with.key(), without.key());
        assert_eq!(with.credential().map(Credential::expose), Some("t0ken"));
        assert!(without.credential().is_none());
        assert_eq!(with.within(b"scope").credential().map(Credential::expose), Some("t0ken"));
        let shown = format!("{with:?} {:?}", with.credential());
        assert!(!shown.contains("t0ken") && shown.contains("[redacted]"), "{shown}");
    }

    #[test]
    fn a_narrowed_principal_owns_apart_from_the_wider_one_and_other_scopes() {
        let anonymous = Principal::anonymous();
        let one = anonymous.within(b"session one");
        let two = anonymous.within(b"session two");
        assert_ne!(one.key(), anonymous.key());
        assert_ne!(one.key(), two.key());
        assert_eq!(one.key(), anonymous.within(b"session one").key(), "the same scope, the same key");
        assert_eq!((one.issuer(), one.subject()), (anonymous.issuer(), anonymous.subject()));
        // No plain key (a digit first) can equal a narrowed one.
        assert!(one.key().starts_with('s') && anonymous.key().starts_with(|c: char| c.is_ascii_digit()));
    }

    #[test]
    fn a_narrowed_principal_is_still_the_same_caller() {
        let caller = Principal::new("https://issuer/", "s/ub", Vec::new());
        assert_eq!(caller.caller_key(), caller.key());
        assert_eq!(caller.within(b"session").caller_key(), caller.key());
        assert_ne!(Principal::new("https://issuer/", "other", Vec::new()).caller_key(), caller.key());
    }
}
