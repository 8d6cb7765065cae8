//! The browser a connection's flow belongs to: a random value the gateway sets as a cookie
//! when a connect link is opened, whose digest is sealed into the sign-in's and the
//! authorization's `state`, and which both callbacks require back.
//!
//! Threat model: a user who opened their own link can stop at any redirect and send its URL
//! (the sign-in's return, or the authorization at the upstream's server) to someone else.
//! Without this, the victim approving that URL would store the victim's upstream account under
//! the sender's principal (or sign the victim's browser in as the sender: login CSRF). The
//! cookie is `HttpOnly`, `SameSite=Lax` (sent on the top-level GET redirect back from the
//! authorization server, not on cross-site subresources), `Path=/`, and on an https public URL
//! `Secure` with the `__Host-` prefix (no sibling host can plant it). What it does not stop:
//! someone who controls the victim's browser, or the link's owner opening the link in the
//! victim's own browser session.
//!
//! Invariant: a callback goes on only when its request carries the cookie whose digest its
//! `state` holds; a browser keeps one value for all its flows (a second link opened meanwhile
//! does not break the first).

use axum::http::HeaderMap;
use axum::http::header::COOKIE;
use sha2::{Digest as _, Sha256};

use super::flow::FLOW_TTL_MS;
use super::{Connector, random_hex};
use crate::error::{ConnectFailure, GatewayError};

/// The cookie's name on an http (loopback) public URL.
const PLAIN_NAME: &str = "mcpgate-oauth-browser";
/// Its name on an https public URL: the prefix makes browsers insist on `Secure`, `Path=/` and
/// no `Domain`.
const HOST_NAME: &str = "__Host-mcpgate-oauth-browser";
/// The value's length: 128 random bits, hex.
const VALUE_LEN: usize = 32;

/// The browser that opened a connect link: its cookie value (kept only in that browser).
pub(crate) struct Browser {
    value: String,
}

impl Connector {
    fn cookie_name(&self) -> &'static str {
        if self.public_url.starts_with("https://") { HOST_NAME } else { PLAIN_NAME }
    }

    /// The browser that sent `headers`, as the opening of a link sees it: the value it already
    /// has, else a new one.
    pub(super) fn browser_opening(&self, headers: &HeaderMap) -> Result<Browser, GatewayError> {
        match self.browser_cookie(headers) {
            Some(value) => Ok(Browser { value }),
            None => Ok(Browser { value: random_hex()? }),
        }
    }

    /// The `Set-Cookie` value that keeps `browser` for the length of a flow.
    pub(crate) fn set_cookie(&self, browser: &Browser) -> String {
        let secure = if self.public_url.starts_with("https://") { "; Secure" } else { "" };
        format!(
            "{}={}; Max-Age={}; Path=/; HttpOnly; SameSite=Lax{secure}",
            self.cookie_name(),
            browser.value,
            FLOW_TTL_MS / 1000
        )
    }

    /// Refuses a callback whose request does not carry the browser `digest` names.
    pub(super) fn same_browser(&self, headers: &HeaderMap, digest: &str) -> Result<(), GatewayError> {
        // The digests are of 128 random bits a sender cannot see: comparing them in variable
        // time tells nothing useful.
        match self.browser_cookie(headers) {
            Some(value) if browser_digest(&value) == digest => Ok(()),
            found => Err(GatewayError::connect(
                ConnectFailure::OtherBrowser,
                format!(
                    "a callback from a browser {} the flow's cookie",
                    if found.is_some() { "with another value of" } else { "without" }
                ),
            )),
        }
    }

    /// The well-formed value of this gateway's cookie among `headers`' cookies.
    fn browser_cookie(&self, headers: &HeaderMap) -> Option<String> {
        let name = self.cookie_name();
        headers
            .get_all(COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .filter_map(|pair| pair.trim().split_once('='))
            .find(|(n, v)| *n == name && v.len() == VALUE_LEN && v.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|(_, v)| v.to_ascii_lowercase())
    }
}

impl Browser {
    /// What a `state` holds of it: a digest (the value itself stays in the browser).
    pub(super) fn digest(&self) -> String {
        browser_digest(&self.value)
    }
}

fn browser_digest(value: &str) -> String {
    Sha256::digest(value.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use mcpgate_seal::{KeyRing, Sealer};
    use mcpgate_store::{AnyStore, MemoryStore};

    use super::*;
    use crate::config::Config;

    fn connector(public_url: &str) -> std::sync::Arc<Connector> {
        let mut config = Config::default();
        let mut upstream = mcpgate_upstream::UpstreamConfig::http("files", "http://127.0.0.1:9/mcp");
        upstream.auth = mcpgate_upstream::config::UpstreamAuth::Oauth;
        config.upstream = vec![upstream];
        config.server.public_url = Some(public_url.to_owned());
        config.auth.browser_login.verify_user = false;
        let sealer = Sealer::new(KeyRing::generate("t").expect("a key"), 16 * 1024);
        Connector::from_config(&config, AnyStore::Memory(MemoryStore::new(4)), &sealer)
            .expect("builds")
            .expect("an oauth upstream")
    }

    fn cookies(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for v in values {
            headers.append(COOKIE, HeaderValue::from_str(v).expect("a header value"));
        }
        headers
    }

    #[test]
    fn an_https_gateway_sets_a_host_only_secure_cookie_and_a_loopback_one_a_plain_one() {
        let https = connector("https://gw.example/base");
        let browser = https.browser_opening(&HeaderMap::new()).expect("a browser");
        let set = https.set_cookie(&browser);
        assert!(set.starts_with("__Host-mcpgate-oauth-browser="), "{set}");
        for attribute in ["; Path=/", "; HttpOnly", "; SameSite=Lax", "; Secure", "; Max-Age=600"] {
            assert!(set.contains(attribute), "{attribute} in {set}");
        }
        assert!(!set.contains("Domain"), "{set}");
        let plain = connector("http://127.0.0.1:8080").set_cookie(&browser);
        assert!(plain.starts_with("mcpgate-oauth-browser=") && !plain.contains("Secure"), "{plain}");
    }

    #[test]
    fn a_callback_needs_the_cookie_of_the_browser_that_opened_the_link() {
        let c = connector("http://127.0.0.1:8080");
        let opener = c.browser_opening(&HeaderMap::new()).expect("a browser");
        let digest = opener.digest();
        let own = cookies(&[&format!("other=1; mcpgate-oauth-browser={}", opener.value)]);
        assert!(c.same_browser(&own, &digest).is_ok());
        assert!(
            c.same_browser(&cookies(&["x=1", &format!("mcpgate-oauth-browser={}", opener.value)]), &digest).is_ok()
        );

        let another = c.browser_opening(&HeaderMap::new()).expect("another browser");
        let refused = |headers: &HeaderMap| {
            matches!(
                c.same_browser(headers, &digest),
                Err(GatewayError::Connect { failure: ConnectFailure::OtherBrowser, .. })
            )
        };
        assert!(refused(&HeaderMap::new()), "no cookie");
        assert!(refused(&cookies(&[&format!("mcpgate-oauth-browser={}", another.value)])), "another browser's");
        assert!(refused(&cookies(&[&format!("__Host-mcpgate-oauth-browser={}", opener.value)])), "another name");
        assert!(refused(&cookies(&[&format!("mcpgate-oauth-browser={digest}")])), "the digest is not the value");
    }

    #[test]
    fn a_browser_keeps_its_value_across_links_and_a_malformed_one_is_replaced() {
        let c = connector("http://127.0.0.1:8080");
        let first = c.browser_opening(&HeaderMap::new()).expect("a browser");
        let again = c.browser_opening(&cookies(&[&format!("mcpgate-oauth-browser={}", first.value)])).expect("again");
        assert_eq!(again.value, first.value, "a second link does not break the first flow");
        let planted = c.browser_opening(&cookies(&["mcpgate-oauth-browser=short"])).expect("a browser");
        assert_eq!(planted.value.len(), VALUE_LEN);
        assert_ne!(planted.value, "short");
    }
}
