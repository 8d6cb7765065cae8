//! PKCE (RFC 7636) with `S256`, the only method MCP clients may use: a fresh random verifier
//! per authorization request, and its challenge.
//!
//! Invariant: a verifier is 43 characters of base64url over 32 random bytes from the OS (256
//! bits), never reused, and only its SHA-256 leaves the gateway before the token request.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::error::UpstreamError;

/// A verifier and its `S256` challenge.
#[derive(Clone, PartialEq, Eq)]
pub struct Pkce {
    /// `code_verifier`, sent with the token request.
    pub verifier: String,
    /// `code_challenge`, sent with the authorization request (`code_challenge_method=S256`).
    pub challenge: String,
}

impl std::fmt::Debug for Pkce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkce").field("challenge", &self.challenge).finish_non_exhaustive()
    }
}

impl Pkce {
    /// A fresh verifier from the OS's random source.
    ///
    /// # Errors
    ///
    /// The OS has no randomness to give.
    pub fn generate() -> Result<Self, UpstreamError> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).map_err(|e| UpstreamError::Authorization {
            detail: "no randomness for PKCE".to_owned(),
            source: Some(crate::error::cause(e)),
        })?;
        Ok(Self::from_verifier(URL_SAFE_NO_PAD.encode(bytes)))
    }

    /// The pair for a known verifier.
    pub fn from_verifier(verifier: String) -> Self {
        let challenge = URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()));
        Self { verifier, challenge }
    }
}

#[cfg(test)]
mod tests {
    use super::Pkce;

    #[test]
    fn the_challenge_is_the_rfc_7636_s256_of_the_verifier() {
        // RFC 7636 Appendix B.
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".to_owned());
        assert_eq!(pkce.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn verifiers_are_fresh_and_within_the_rfc_bounds() {
        let (a, b) = (Pkce::generate().expect("random"), Pkce::generate().expect("random"));
        assert_ne!(a.verifier, b.verifier);
        assert_eq!(a.verifier.len(), 43);
        assert!(a.verifier.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_'));
        assert!(!format!("{a:?}").contains(&a.verifier), "the verifier stays out of logs");
    }
}
