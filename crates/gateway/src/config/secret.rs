//! `Secret`: a setting's secret value (a key, a password, a token). Invariant: `Debug` never
//! shows it, so neither does a logged `Config`; code reads it through `expose`, whose call
//! sites are the only places it is visible.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A secret string: serialized as itself, never shown by `Debug`.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value; call sites are the only places it is visible.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}
