//! The authenticated caller. Everything a caller owns (sessions, request state, tasks) is
//! bound to its principal key.
//!
//! Invariant: two principals are the same caller exactly when issuer and subject are equal
//! (and, for a narrowed principal, its scope); the key encodes both unambiguously
//! (length-prefixed issuer), so no pair of distinct (iss, sub) pairs maps to one key.

use std::fmt;
use std::fmt::Write as _;
use std::sync::Arc;

use sha2::{Digest, Sha256};

/// An authenticated caller: (issuer, subject) plus granted scopes.
#[derive(Clone, PartialEq, Eq)]
pub struct Principal(Arc<Inner>);

#[derive(PartialEq, Eq)]
struct Inner {
    issuer: String,
    subject: String,
    key: String,
    scopes: Vec<String>,
}

impl Principal {
    /// A principal from token claims.
    pub fn new(issuer: &str, subject: &str, scopes: Vec<String>) -> Self {
        let key = format!("{}:{issuer}{subject}", issuer.len());
        Self(Arc::new(Inner { issuer: issuer.to_owned(), subject: subject.to_owned(), key, scopes }))
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

    /// A short pseudonymous id for logs (no subject in clear text).
    pub fn log_id(&self) -> String {
        let digest = Sha256::digest(self.0.key.as_bytes());
        digest[..6].iter().map(|b| format!("{b:02x}")).collect()
    }
}

impl fmt::Debug for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Principal").field("id", &self.log_id()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::Principal;

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
