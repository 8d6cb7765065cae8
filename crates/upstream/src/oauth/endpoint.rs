//! Requests to an authorization server (token, registration and metadata endpoints): form
//! encoding as OAuth wants it, HTTP Basic client authentication, and answers read within a
//! size and a time bound.
//!
//! Threat model: the server may be slow, hostile or gone. No answer is read past `max` bytes
//! or past the timeout, and what failed is described without the request (it holds codes,
//! verifiers, secrets or tokens).

use std::time::Duration;

use base64::Engine as _;

use crate::error::{Cause, UpstreamError, unlocated};

/// Why an answer could not be had.
#[derive(Debug, Clone)]
pub(crate) enum Unanswered {
    /// The server could not be reached, or its answer broke off (the connection's error,
    /// without the request's URL).
    Unavailable(Cause),
    /// The answer is larger than accepted.
    TooLarge(usize),
    /// No answer within the timeout.
    Timeout(Duration),
}

impl Unanswered {
    /// What happened, naming `what` was asked (e.g. "the token endpoint"), and the error
    /// behind it, if one said why.
    pub(crate) fn explain(self, what: &str) -> (String, Option<Cause>) {
        match self {
            Self::Unavailable(why) => (format!("cannot reach {what}"), Some(why)),
            Self::TooLarge(max) => (format!("{what}'s answer is over {max} bytes"), None),
            Self::Timeout(after) => (format!("no answer from {what} within {} s", after.as_secs()), None),
        }
    }

    /// As a failed authorization (see [`Unanswered::explain`]).
    pub(crate) fn into_authorization(self, what: &str) -> UpstreamError {
        let (detail, source) = self.explain(what);
        UpstreamError::Authorization { detail, source }
    }
}

/// Sends `request` and reads its answer: status and body, bounded by `max` bytes and `timeout`.
pub(crate) async fn answer(
    request: reqwest::RequestBuilder,
    max: usize,
    timeout: Duration,
) -> Result<(u16, Vec<u8>), Unanswered> {
    let read = async {
        let mut response = request.send().await.map_err(|e| Unanswered::Unavailable(unlocated(e)))?;
        let status = response.status().as_u16();
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| Unanswered::Unavailable(unlocated(e)))? {
            if body.len() + chunk.len() > max {
                return Err(Unanswered::TooLarge(max));
            }
            body.extend_from_slice(&chunk);
        }
        Ok((status, body))
    };
    tokio::time::timeout(timeout, read).await.unwrap_or(Err(Unanswered::Timeout(timeout)))
}

/// `application/x-www-form-urlencoded` encoding of one value (the WHATWG byte serializer:
/// `*-._` and alphanumerics as they are, space as `+`, every other byte as `%XX`).
pub(crate) fn form(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'*' | b'-' | b'.' | b'_' => out.push(char::from(b)),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// A form body of `fields` (each value encoded).
pub(crate) fn form_body<'a>(fields: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    fields.into_iter().map(|(k, v)| format!("{}={}", form(k), form(v))).collect::<Vec<_>>().join("&")
}

/// Text from an authorization server fit for an error message: control characters dropped,
/// clipped to `max` characters.
pub(crate) fn printable(text: &str, max: usize) -> String {
    let printable: String = text.chars().filter(|c| !c.is_control()).collect();
    mcpgate_protocol::quote::clip(&printable, max)
}

/// HTTP Basic client authentication as RFC 6749 §2.3.1 has it: id and secret each
/// form-encoded first.
pub(crate) fn basic_authorization(client_id: &str, client_secret: &str) -> String {
    let pair = format!("{}:{}", form(client_id), form(client_secret));
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_encode_as_oauth_servers_decode_them() {
        assert_eq!(form("a b+c/d:é"), "a+b%2Bc%2Fd%3A%C3%A9");
        assert_eq!(
            form_body([("grant_type", "authorization_code"), ("code", "x&y=z")]),
            "grant_type=authorization_code&code=x%26y%3Dz"
        );
        // RFC 6749 §2.3.1: the pair is form-encoded, then base64.
        assert_eq!(
            basic_authorization("id:1", "s p"),
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("id%3A1:s+p"))
        );
    }
}
