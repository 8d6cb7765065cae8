//! Revoking a token at its authorization server (RFC 7009), so a copy of a disconnected
//! user's token dies with the connection.
//!
//! Threat model: the server may be hostile, slow or gone. The token goes only to the
//! revocation endpoint of the server's own checked metadata, https (http only on a loopback
//! host), authenticated as the client it was issued to (as at the token endpoint); redirects
//! are never followed; the answer is bounded in size and time, and an error names the status
//! only, never the token nor what the server said.

use super::client::{ClientRegistration, OAuthClient};
use super::discovery::{ServerMetadata, secure_url};
use super::endpoint::answer;
use crate::error::UpstreamError;

/// Most bytes read of a revocation answer (RFC 7009: an empty 200, or an OAuth error).
const MAX_ANSWER: usize = 4 * 1024;

/// Which token is revoked (RFC 7009 `token_type_hint`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenKind {
    /// `access_token`.
    Access,
    /// `refresh_token` (servers also revoke the access tokens of its grant, RFC 7009 §2.1).
    Refresh,
}

impl TokenKind {
    fn hint(self) -> &'static str {
        match self {
            Self::Access => "access_token",
            Self::Refresh => "refresh_token",
        }
    }
}

impl OAuthClient {
    /// Revokes `token` (a `kind`) at `server`'s revocation endpoint, as `client`. `Ok(false)`:
    /// the server offers none.
    ///
    /// # Errors
    ///
    /// The endpoint is not https (nor http on loopback), cannot be reached in time, or answers
    /// other than 200 (RFC 7009 §2.2: an invalid or unknown token is answered 200 too).
    pub async fn revoke(
        &self,
        server: &ServerMetadata,
        client: &ClientRegistration,
        token: &str,
        kind: TokenKind,
    ) -> Result<bool, UpstreamError> {
        let Some(endpoint) = server.revocation_endpoint.as_deref() else { return Ok(false) };
        // An authorization server's address, as for the token endpoint: never a private one.
        let url = secure_url(endpoint, "revocation_endpoint")?;
        self.addresses.check_literal(&url, "the revocation endpoint")?;
        let request = self.client_post(url, client, &[("token", token), ("token_type_hint", kind.hint())]);
        let (status, _) = answer(request, MAX_ANSWER, self.timeout)
            .await
            .map_err(|e| e.into_authorization("the revocation endpoint"))?;
        if status != 200 {
            return Err(UpstreamError::authorization(format!("the revocation endpoint answered HTTP {status}")));
        }
        Ok(true)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::oauth::ClientAuth;

    fn server(revocation: Option<&str>) -> ServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": "https://as.example", "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token", "revocation_endpoint": revocation,
            "code_challenge_methods_supported": ["S256"],
        }))
        .expect("metadata")
    }

    #[tokio::test]
    async fn nothing_is_sent_without_an_endpoint_nor_to_plain_http_off_loopback() {
        let oauth = OAuthClient::new(Duration::from_secs(1)).expect("a client");
        let client = ClientRegistration { client_id: "gw".to_owned(), client_secret: None, auth: ClientAuth::None };
        assert!(!oauth.revoke(&server(None), &client, "rt", TokenKind::Refresh).await.expect("none offered"));
        let refused = oauth
            .revoke(&server(Some("http://as.example/revoke")), &client, "rt", TokenKind::Refresh)
            .await
            .expect_err("plain http");
        assert!(refused.to_string().contains("revocation_endpoint"), "{refused}");
        assert!(!refused.to_string().contains("rt\""), "{refused}");
    }
}
