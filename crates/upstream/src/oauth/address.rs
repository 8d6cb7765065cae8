//! Which network addresses the gateway's requests to an authorization server may reach: its
//! metadata, registration, token (and revocation) endpoints, which an upstream names.
//!
//! Threat model: a hostile upstream's metadata names authorization servers and endpoints of
//! its choosing, and the gateway GETs and POSTs there when a user opens a connect link or a
//! token is refreshed — a blind SSRF into the gateway's network (cloud metadata services,
//! admin ports on loopback, private ranges). So every such request goes only to an address
//! checked here: never a loopback, private, shared (CGNAT), link-local (cloud metadata among
//! them), unspecified, multicast or reserved one — unless the operator allows them
//! (`[upstream.oauth] allow_private_addresses`), and loopback where the upstream itself is on
//! loopback (a development setup, or a sidecar). The check is made on the address connected to:
//! an IP literal before the request, a name on what it resolves to (the connection is made
//! only to the addresses that passed, so a name rebound between check and use changes
//! nothing). Requests to the upstream's own origin (its challenge and resource metadata) are
//! not checked here: the operator named that host.
//!
//! Not covered: an HTTP proxy configured by the environment resolves names itself (the check
//! then sees only literals); run without one, or have the proxy refuse internal targets.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::UpstreamError;

/// Which non-public addresses requests to authorization servers may reach.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Loopback addresses (`127.0.0.0/8`, `::1`).
    pub loopback: bool,
    /// Every other non-public address (private, shared, link-local, reserved).
    pub private: bool,
}

impl Default for AddressPolicy {
    /// Public addresses and loopback (a library user's development default; the gateway
    /// decides per upstream with [`AddressPolicy::for_upstream`]).
    fn default() -> Self {
        Self { loopback: true, private: false }
    }
}

impl AddressPolicy {
    /// Public addresses only.
    pub const PUBLIC: Self = Self { loopback: false, private: false };

    /// The policy for the authorization servers of the upstream at `endpoint`: everything
    /// where the operator allowed non-public addresses; else public addresses, and loopback
    /// only when the upstream itself is on a loopback host.
    pub fn for_upstream(endpoint: &Url, allow_private: bool) -> Self {
        if allow_private {
            return Self { loopback: true, private: true };
        }
        let loopback = endpoint
            .host_str()
            .is_some_and(|h| mcpgate_protocol::authority::is_loopback_host(mcpgate_protocol::authority::host_name(h)));
        Self { loopback, private: false }
    }

    /// Why `ip` may not be reached under this policy (`None`: it may).
    pub fn refuses(&self, ip: IpAddr) -> Option<&'static str> {
        let kind = kind(ip)?;
        let allowed = if kind == LOOPBACK { self.loopback } else { self.private };
        (!allowed).then_some(kind)
    }

    /// Checks the host of `url` when it is an IP literal (names are checked once resolved,
    /// by the resolver of the client making the request).
    ///
    /// # Errors
    ///
    /// A literal this policy refuses: `what` names the endpoint in the message.
    pub(crate) fn check_literal(&self, url: &Url, what: &str) -> Result<(), UpstreamError> {
        let host = url.host_str().unwrap_or_default();
        let Ok(ip) = mcpgate_protocol::authority::host_name(host).parse::<IpAddr>() else { return Ok(()) };
        match self.refuses(ip) {
            Some(why) => Err(refused(what, ip, why)),
            None => Ok(()),
        }
    }
}

const LOOPBACK: &str = "loopback";

/// What kind of non-public address `ip` is (`None`: a public one).
fn kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => kind_v4(v4),
        IpAddr::V6(v6) => {
            // IPv4-mapped (::ffff:a.b.c.d) and the NAT64 well-known prefix (64:ff9b::/96)
            // reach an IPv4 address: judged as that address.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return kind_v4(v4);
            }
            let o = v6.octets();
            if v6.segments()[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
                return kind_v4(Ipv4Addr::new(o[12], o[13], o[14], o[15]));
            }
            // 6to4 (2002::/16) carries its IPv4 address in the next 32 bits: judged as that.
            if v6.segments()[0] == 0x2002 {
                return kind_v4(Ipv4Addr::new(o[2], o[3], o[4], o[5]));
            }
            kind_v6(v6)
        }
    }
}

fn kind_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // RFC 1918, and RFC 6598 shared space (carrier NAT; some clouds' metadata lives there).
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local (cloud metadata services live there)")
    } else if a == 0
        || ip.is_broadcast()
        || ip.is_multicast()
        || a >= 240
        || (a == 192 && b == 0 && ip.octets()[2] == 0)
    {
        Some("unspecified, multicast or reserved")
    } else if (a == 198 && (18..20).contains(&b)) || ip.is_documentation() {
        Some("reserved")
    } else {
        None
    }
}

fn kind_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_loopback() {
        Some(LOOPBACK)
    } else if first & 0xfe00 == 0xfc00 {
        Some("private")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local (cloud metadata services live there)")
    } else if first & 0xffc0 == 0xfec0 {
        // Deprecated site-local (fec0::/10): still routed inside some networks.
        Some("private")
    } else if ip.segments()[..3] == [0x64, 0xff9b, 1] {
        // The local-use NAT64 prefix (64:ff9b:1::/48, RFC 8215): translated inside the network.
        Some("private")
    } else if ip.is_unspecified() || ip.is_multicast() || ip.segments()[..6] == [0; 6] {
        // `::`, multicast, and the deprecated IPv4-compatible `::a.b.c.d`.
        Some("unspecified, multicast or reserved")
    } else if first == 0x2001 && ip.segments()[1] == 0x0db8 {
        Some("reserved")
    } else {
        None
    }
}

fn refused(what: &str, ip: IpAddr, why: &str) -> UpstreamError {
    UpstreamError::authorization(format!(
        "{what} is at {ip}, a {why} address: refused, no request made (allow non-public \
             authorization servers with [upstream.oauth] allow_private_addresses)"
    ))
}

/// The resolver of the client that talks to authorization servers: a name's addresses are
/// looked up, those the policy refuses dropped; a name left with none fails.
#[derive(Debug)]
pub(crate) struct GuardedResolver(pub(crate) AddressPolicy);

/// A name that resolves only to refused addresses.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.0;
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let mut first_refused = None;
            let allowed: Vec<SocketAddr> = found
                .into_iter()
                .filter(|a| match policy.refuses(a.ip()) {
                    Some(why) => {
                        first_refused.get_or_insert((a.ip(), why));
                        false
                    }
                    None => true,
                })
                .collect();
            if allowed.is_empty() {
                let detail = match first_refused {
                    Some((ip, why)) => format!(
                        "{host} resolves only to non-public addresses ({ip}: {why}): refused, no request made \
                         (allow them with [upstream.oauth] allow_private_addresses)"
                    ),
                    None => format!("{host} resolves to no address"),
                };
                return Err(Box::new(Refused(detail)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(allowed.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an IP")
    }

    #[test]
    fn non_public_addresses_are_named_and_public_ones_pass() {
        let public = AddressPolicy::PUBLIC;
        for (addr, kind) in [
            ("127.0.0.1", "loopback"),
            ("127.9.9.9", "loopback"),
            ("::1", "loopback"),
            ("::ffff:127.0.0.1", "loopback"),
            ("10.1.2.3", "private"),
            ("172.16.0.1", "private"),
            ("192.168.1.1", "private"),
            ("100.100.100.200", "private"),
            ("fd00:ec2::254", "private"),
            ("169.254.169.254", "link-local"),
            ("fe80::1", "link-local"),
            ("::ffff:169.254.169.254", "link-local"),
            ("64:ff9b::a9fe:a9fe", "link-local"),
            ("2002:a9fe:a9fe::", "link-local"),
            ("2002:7f00:1::1", "loopback"),
            ("64:ff9b:1::a00:1", "private"),
            ("fec0::1", "private"),
            ("0.0.0.0", "unspecified"),
            ("::", "unspecified"),
            ("224.0.0.1", "multicast"),
            ("255.255.255.255", "reserved"),
        ] {
            let why = public.refuses(ip(addr)).unwrap_or_else(|| panic!("{addr} refused"));
            assert!(why.contains(kind), "{addr}: {why}");
        }
        for addr in ["93.184.216.34", "8.8.8.8", "2606:4700::1111", "172.32.0.1", "100.128.0.1", "2002:808:808::"] {
            assert_eq!(public.refuses(ip(addr)), None, "{addr} is public");
        }
    }

    #[test]
    fn loopback_only_next_to_a_loopback_upstream_everything_only_when_allowed() {
        let on_loopback = AddressPolicy::for_upstream(&Url::parse("http://127.0.0.1:8/mcp").expect("url"), false);
        assert_eq!(on_loopback.refuses(ip("127.0.0.1")), None);
        assert!(on_loopback.refuses(ip("10.0.0.1")).is_some() && on_loopback.refuses(ip("169.254.169.254")).is_some());
        let localhost = AddressPolicy::for_upstream(&Url::parse("http://localhost:8/mcp").expect("url"), false);
        assert_eq!(localhost, on_loopback);
        let remote = AddressPolicy::for_upstream(&Url::parse("https://mcp.example/mcp").expect("url"), false);
        assert!(remote.refuses(ip("127.0.0.1")).is_some());
        let allowed = AddressPolicy::for_upstream(&Url::parse("https://mcp.example/mcp").expect("url"), true);
        for addr in ["127.0.0.1", "10.0.0.1", "169.254.169.254", "fd00::1"] {
            assert_eq!(allowed.refuses(ip(addr)), None, "{addr}");
        }
    }

    #[test]
    fn literals_are_checked_before_any_request_names_after_resolution() {
        let public = AddressPolicy::PUBLIC;
        let url = |s: &str| Url::parse(s).expect("url");
        let e = public.check_literal(&url("https://169.254.169.254/latest"), "the token endpoint").expect_err("no");
        assert!(e.to_string().contains("the token endpoint") && e.to_string().contains("link-local"), "{e}");
        assert!(public.check_literal(&url("https://[fd00::1]/t"), "t").is_err());
        assert!(public.check_literal(&url("https://as.example/t"), "t").is_ok(), "a name: the resolver's");
        assert!(public.check_literal(&url("https://93.184.216.34/t"), "t").is_ok());
    }

    #[tokio::test]
    async fn a_name_resolving_only_to_refused_addresses_fails_to_resolve() {
        let resolver = GuardedResolver(AddressPolicy::PUBLIC);
        let name: Name = "localhost".parse().expect("a name");
        let Err(e) = resolver.resolve(name).await else { panic!("localhost resolves to loopback only") };
        assert!(e.to_string().contains("non-public") && e.to_string().contains("loopback"), "{e}");
        let resolver = GuardedResolver(AddressPolicy { loopback: true, private: false });
        let name: Name = "localhost".parse().expect("a name");
        assert!(resolver.resolve(name).await.is_ok(), "allowed next to a loopback upstream");
    }
}
