//! URI authorities (`host[:port]`, `[v6]:port`): their host name, and whether it is loopback.
//! The gateway's Host/Origin checks and both crates' "plain http only on loopback" rules read
//! authorities here, so they agree on what loopback means.
//!
//! Invariant: only `localhost` (any case) and IP addresses in a loopback range are loopback;
//! a name that merely resolves to one (DNS can be rebound) is not.

use std::net::IpAddr;

/// The host name of a `host[:port]` or `[v6]:port` authority (brackets removed).
pub fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

/// Whether `host` is `localhost` or a loopback IP address.
pub fn is_loopback_host(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Whether `host[:port]` names a loopback host.
pub fn is_loopback_authority(authority: &str) -> bool {
    is_loopback_host(host_name(authority))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_and_loopback() {
        assert_eq!(host_name("localhost:3000"), "localhost");
        assert_eq!(host_name("[::1]:8080"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
        assert!(is_loopback_authority("LOCALHOST:1"));
        assert!(is_loopback_authority("127.0.0.2:8080"));
        assert!(is_loopback_authority("[::1]:8080"));
        assert!(!is_loopback_authority("localhost.evil.example:80"));
        assert!(!is_loopback_authority("10.0.0.1"));
        assert!(!is_loopback_authority("[::2]:80"));
    }
}
