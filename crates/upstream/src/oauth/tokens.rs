//! What a token endpoint answers to an authorization code or a refresh token (RFC 6749 §5):
//! the tokens, or the OAuth error.
//!
//! Threat model: the answer comes from a server that may be hostile; it holds secrets. Only a
//! `Bearer` token of printable ASCII within a size bound is taken; error texts are clipped and
//! never quote the body (which may hold a token).

use std::fmt;

use serde::Deserialize;
use serde_json::Value;

use super::endpoint::printable;
use crate::error::UpstreamError;

/// Longest token accepted (access or refresh).
const MAX_TOKEN: usize = 16 * 1024;

/// Tokens a token endpoint issued.
#[derive(Clone, PartialEq, Eq)]
pub struct TokenSet {
    /// What upstream requests carry as `Authorization: Bearer`.
    pub access_token: String,
    /// What gets the next access token, if the server issued one.
    pub refresh_token: Option<String>,
    /// Seconds the access token lives, if said.
    pub expires_in: Option<u64>,
    /// The scopes granted, if said (else those asked for).
    pub scope: Option<String>,
}

impl fmt::Debug for TokenSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSet")
            .field("refresh_token", &self.refresh_token.as_ref().map(|_| "[redacted]"))
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Issued {
    access_token: String,
    token_type: String,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    expires_in: Option<Value>,
    #[serde(default)]
    scope: Option<String>,
}

#[derive(Deserialize)]
struct Refusal {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

/// Reads a token endpoint's answer.
///
/// # Errors
///
/// [`UpstreamError::AuthorizationRefused`] for an OAuth error answer (e.g. `invalid_grant`:
/// the code or refresh token is spent, revoked or expired), [`UpstreamError::Authorization`]
/// for anything else unusable.
pub(crate) fn read(status: u16, body: &[u8]) -> Result<TokenSet, UpstreamError> {
    let unusable = |detail: String| Err(UpstreamError::authorization(detail));
    if !(200..300).contains(&status) {
        return match serde_json::from_slice::<Refusal>(body) {
            Ok(refusal) if (400..500).contains(&status) => Err(UpstreamError::AuthorizationRefused {
                error: printable(&refusal.error, 64),
                description: refusal.error_description.map(|d| printable(&d, 200)),
            }),
            _ => unusable(format!("the token endpoint answered HTTP {status}")),
        };
    }
    let issued = match serde_json::from_slice::<Issued>(body) {
        Ok(issued) => issued,
        // serde's message may quote the body, which holds tokens: only the position.
        Err(e) => return unusable(format!("unreadable token answer (line {}, column {})", e.line(), e.column())),
    };
    if !issued.token_type.eq_ignore_ascii_case("bearer") {
        return unusable(format!("token_type {:?} is not Bearer", printable(&issued.token_type, 32)));
    }
    let usable = |t: &str| !t.is_empty() && t.len() <= MAX_TOKEN && t.bytes().all(|b| b.is_ascii_graphic());
    if !usable(&issued.access_token) || issued.refresh_token.as_deref().is_some_and(|t| !usable(t)) {
        return unusable("the issued tokens are not usable bearer tokens".to_owned());
    }
    let expires_in = match &issued.expires_in {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(_) => return unusable("expires_in is not a number".to_owned()),
    };
    Ok(TokenSet {
        access_token: issued.access_token,
        refresh_token: issued.refresh_token,
        expires_in,
        scope: issued.scope.map(|s| printable(&s, 1024)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_answer_gives_its_tokens() {
        let set = read(
            200,
            br#"{"access_token":"at","token_type":"bearer","refresh_token":"rt","expires_in":"30","scope":"a b"}"#,
        )
        .expect("tokens");
        assert_eq!(
            (set.access_token.as_str(), set.refresh_token.as_deref(), set.expires_in),
            ("at", Some("rt"), Some(30))
        );
        assert!(!format!("{set:?}").contains("rt\""), "tokens stay out of Debug: {set:?}");
        assert!(!format!("{set:?}").contains("\"at\""));
    }

    #[test]
    fn errors_and_unusable_answers_never_quote_the_body() {
        let refused = read(400, br#"{"error":"invalid_grant","error_description":"grant request is invalid"}"#);
        assert!(
            matches!(refused, Err(UpstreamError::AuthorizationRefused { ref error, .. }) if error == "invalid_grant")
        );
        for (status, body) in [
            (200, &br#"{"access_token":"secret-token","token_type":"mac"}"#[..]),
            (200, br#"{"access_token":"sec ret","token_type":"Bearer"}"#),
            (200, br#"{"access_token":"secret-token""#),
            (500, br#"{"error":"server_error"}"#),
        ] {
            let e = read(status, body).expect_err("unusable");
            assert!(!e.to_string().contains("secret"), "{e}");
        }
    }
}
