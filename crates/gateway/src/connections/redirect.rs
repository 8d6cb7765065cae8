//! The redirect URIs the upstreams' authorization servers send users back to: one per upstream
//! and authorization server (RFC 9700 §4.4.2.2), and the check that an authorization came back
//! to the very one its flow was sent with.
//!
//! Threat model (mix-up, RFC 9700 §4.4): a hostile upstream's authorization server forwards the
//! user's browser to an honest server with the gateway's client id there, the same `state` and
//! code challenge. Were there one redirect URI, the honest server's code would come back to it
//! with the hostile flow's `state`, and be redeemed — with the PKCE verifier — at the hostile
//! token endpoint that state names: the attacker then redeems code and verifier at the honest
//! server and holds the user's account there. So each flow's redirect URI says which upstream and
//! server it is for, and a response arriving at any other is refused before its code is used:
//!
//! - a client the gateway registered (RFC 7591, per upstream and server): `/oauth/callback/
//!   <upstream>/<tag>`, the tag a digest of the issuer; that server holds only that URI for that
//!   client, so no other flow's response can come back to it;
//! - a client registered beforehand (`[upstream.oauth] client_id`) or the Client ID Metadata
//!   Document: `/oauth/callback/<upstream>`, which the operator registers (or the document
//!   lists). Neither names one server by itself — a document is accepted by every server that
//!   takes one, a client id without `[upstream.oauth] issuer` may be shown to any server the
//!   upstream names — so such a flow is started only with a server that sends `iss` (RFC 9207),
//!   and its response must carry it (`authorize`); a pinned issuer names the one server.

use super::client_source::ClientSource;
use super::digest::digest;

/// Where the upstreams' authorization servers send users back: under it, one redirect URI per
/// upstream and server; itself, the single one of earlier releases (refused).
pub(crate) const CALLBACK_PATH: &str = "/oauth/callback";

/// The path (under `public_url`) of the redirect URI of a flow for `upstream` at authorization
/// server `issuer`, with a client from `source`.
pub(super) fn callback_path(upstream: &str, source: ClientSource, issuer: &str) -> String {
    match source {
        ClientSource::Configured | ClientSource::Metadata => format!("{CALLBACK_PATH}/{upstream}"),
        ClientSource::Registered => format!("{CALLBACK_PATH}/{upstream}/{}", digest(&["redirect-uri", issuer])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_upstream_and_registered_server_has_its_own_redirect_uri() {
        let a = callback_path("files", ClientSource::Registered, "https://as.example");
        let b = callback_path("files", ClientSource::Registered, "https://evil.example");
        let c = callback_path("mail", ClientSource::Registered, "https://as.example");
        assert!(a.starts_with("/oauth/callback/files/") && a.len() == "/oauth/callback/files/".len() + 32, "{a}");
        assert!(a != b && a != c && b != c);
        assert_eq!(callback_path("files", ClientSource::Configured, "https://as.example"), "/oauth/callback/files");
        assert_eq!(callback_path("files", ClientSource::Metadata, "https://x.example"), "/oauth/callback/files");
    }
}
