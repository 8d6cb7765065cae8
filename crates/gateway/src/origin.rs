//! DNS-rebinding and cross-origin protection: which `Host` and `Origin` values may reach the
//! MCP endpoint, `/metrics` and `/upstreams` (and, with a policy of its own, the admin
//! listener).
//!
//! Threat model: a web page in the user's browser (foreign origin) POSTs to a gateway the
//! user can reach, directly or through a DNS name rebound to a loopback address. Browsers
//! always send `Origin` on such requests and the rebound request carries the attacker's host
//! name in `Host`, so a loopback-bound gateway accepts only loopback host names, and any
//! request with an `Origin` must come from an allowed origin. Non-browser clients send no
//! `Origin` and are governed by authentication alone. The host is the request's authority:
//! the `:authority` of an HTTP/2 request (h2c carries no `Host`), else the `Host` header.

use axum::http::{HeaderMap, Uri, header};

use mcpgate_protocol::authority::{host_name, is_loopback_host};

use crate::config::{Config, parse_origin};
use crate::error::{GatewayError, clip};

const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Which hosts and origins are allowed.
#[derive(Debug, Clone)]
pub(crate) struct OriginPolicy {
    any_origin: bool,
    origins: Vec<String>,
    loopback_origins: bool,
    hosts: Option<Vec<String>>,
}

impl OriginPolicy {
    /// The policy of a validated config.
    pub(crate) fn from_config(c: &Config) -> Self {
        let loopback = c.listens_on_loopback();
        let hosts = if !c.http.allowed_hosts.is_empty() {
            Some(c.http.allowed_hosts.iter().map(|h| h.trim().trim_matches(['[', ']']).to_ascii_lowercase()).collect())
        } else if loopback {
            Some(LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect())
        } else {
            None
        };
        Self {
            any_origin: c.http.allowed_origins.iter().any(|o| o == "*"),
            origins: c.http.allowed_origins.iter().filter_map(|o| parse_origin(o)).collect(),
            // An explicit list is authoritative; without one, a loopback listener trusts pages
            // served from loopback (the user's own machine).
            loopback_origins: loopback && c.http.allowed_origins.is_empty(),
            hosts,
        }
    }

    /// The policy of the admin listener: no browser has business there, so any `Origin` is
    /// refused, and a loopback listener accepts only loopback host names.
    pub(crate) fn admin(loopback: bool) -> Self {
        Self {
            any_origin: false,
            origins: Vec::new(),
            loopback_origins: false,
            hosts: loopback.then(|| LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect()),
        }
    }

    /// Checks one request's host (its URI's authority, else `Host`) and `Origin`.
    pub(crate) fn check(&self, headers: &HeaderMap, uri: &Uri) -> Result<(), GatewayError> {
        if let Some(allowed) = &self.hosts {
            // HTTP/2 puts the host in `:authority`, which arrives as the URI's authority; an
            // HTTP/1.1 absolute-form target's authority wins over `Host` as RFC 9112 says.
            let host = match uri.authority() {
                Some(authority) => authority.as_str(),
                None => headers.get(header::HOST).and_then(|v| v.to_str().ok()).unwrap_or(""),
            };
            let name = host_name(host).to_ascii_lowercase();
            if !allowed.contains(&name) {
                return Err(GatewayError::ForbiddenHost { host: clip(host) });
            }
        }
        let Some(origin) = headers.get(header::ORIGIN) else {
            return Ok(());
        };
        if self.any_origin {
            return Ok(());
        }
        let raw = origin.to_str().unwrap_or("");
        let allowed = parse_origin(raw).is_some_and(|o| {
            self.origins.contains(&o) || (self.loopback_origins && is_loopback_host(host_name(origin_authority(&o))))
        });
        if allowed { Ok(()) } else { Err(GatewayError::ForbiddenOrigin { origin: clip(raw) }) }
    }
}

fn origin_authority(origin: &str) -> &str {
    origin.split_once("://").map_or(origin, |(_, a)| a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        assert_eq!(parse_origin("HTTP://LocalHost:3000").as_deref(), Some("http://localhost:3000"));
        assert!(parse_origin("null").is_none());
        assert!(parse_origin("http://a/b").is_none());
    }

    #[test]
    fn the_host_of_an_http2_request_is_its_authority() {
        let policy = OriginPolicy::admin(true);
        let none = HeaderMap::new();
        let h2: Uri = "http://localhost:8080/mcp".parse().expect("uri");
        assert!(policy.check(&none, &h2).is_ok());
        let foreign: Uri = "http://evil.example.com/mcp".parse().expect("uri");
        assert!(policy.check(&none, &foreign).is_err());
        let mut host = HeaderMap::new();
        host.insert(header::HOST, "127.0.0.1:1".parse().expect("header"));
        assert!(policy.check(&host, &Uri::from_static("/mcp")).is_ok());
        assert!(policy.check(&host, &foreign).is_err(), "the authority wins over Host");
    }
}
