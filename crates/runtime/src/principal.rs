//! The authenticated caller. Everything a caller owns (sessions, request state, tasks) is
//! bound to its principal key.
//!
//! Invariant: two principals are the same caller exactly when issuer and subject are equal;
//! the key encodes both unambiguously (length-prefixed issuer), so no pair of distinct
//! (iss, sub) pairs maps to one key.

use std::fmt;
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
