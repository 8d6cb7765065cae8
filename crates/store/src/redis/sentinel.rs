//! Where the single-server connections come from: a fixed Redis address, or the current
//! primary of a Redis Sentinel set, asked of the sentinels and confirmed with `ROLE`
//! (the pool, the job reader and the event subscriber all draw their connections here).
//!
//! Invariants: a resolution is bounded by the command timeout and is cached until a
//! connection made from it fails at the connection level, or is answered `-READONLY` (its
//! node was demoted: a failover happened under it, or an old primary came back as a
//! replica); that failure retires the cached primary once (by its epoch, so a late failure on
//! an old connection never discards a newer resolution) and the next connection re-resolves.
//! While the sentinels still name a dead primary, resolving fails (the `ROLE` check cannot
//! connect) and callers see `Unavailable`, never a connection to a node that is not primary.
//!
//! Threat model: the sentinels are trusted to name the primary; a sentinel an attacker
//! controls can send every write to a server of its choosing. Reach them over a private
//! network, with `sentinel_password` (and TLS where the network is not trusted).

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, TlsMode};

use super::tls::Trust;
use crate::error::StoreError;

/// How to find the primary through Redis Sentinel.
#[derive(Clone, PartialEq, Eq)]
pub struct SentinelOptions {
    /// The sentinels, `host:port` each (at least one).
    pub addresses: Vec<String>,
    /// The name the sentinels monitor the primary under (`sentinel monitor <name> ...`).
    pub master_name: String,
    /// TLS to the sentinels and to the data nodes (verified against `store.tls_ca_file` or
    /// the system roots).
    pub tls: bool,
    /// The data nodes' ACL user.
    pub username: Option<String>,
    /// The data nodes' password.
    pub password: Option<String>,
    /// The sentinels' ACL user.
    pub sentinel_username: Option<String>,
    /// The sentinels' password.
    pub sentinel_password: Option<String>,
}

impl std::fmt::Debug for SentinelOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Passwords never reach a log.
        let hidden = |p: &Option<String>| p.as_ref().map(|_| "<hidden>");
        f.debug_struct("SentinelOptions")
            .field("addresses", &self.addresses)
            .field("master_name", &self.master_name)
            .field("tls", &self.tls)
            .field("username", &self.username)
            .field("password", &hidden(&self.password))
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &hidden(&self.sentinel_password))
            .finish()
    }
}

/// A client for the server to talk to, and the epoch of the resolution that named it.
#[derive(Clone)]
pub(super) struct Node {
    pub(super) client: Client,
    pub(super) epoch: u64,
}

/// Where the single-server connections come from.
pub(super) enum NodeSource {
    /// One fixed server (`redis_url`), or one seed of a cluster (for pub/sub). Boxed: a
    /// client carrying TLS parameters is large.
    Fixed(Box<Client>),
    /// The primary the sentinels name.
    Sentinel(Box<Resolver>),
}

impl NodeSource {
    /// A client for the server to connect to now (resolving the primary if none is cached).
    pub(super) async fn node(&self) -> Result<Node, StoreError> {
        match self {
            Self::Fixed(client) => Ok(Node { client: (**client).clone(), epoch: 0 }),
            // Boxed: the sentinel client's futures are deep, and every store call's future
            // would otherwise carry their layout (past rustc's query depth in callers).
            Self::Sentinel(resolver) => Box::pin(resolver.node()).await,
        }
    }

    /// A connection made from the resolution of `epoch` failed at the connection level (or
    /// met a demoted node): the next connection resolves the primary again.
    pub(super) fn retire(&self, epoch: u64) {
        if let Self::Sentinel(resolver) = self {
            resolver.retire(epoch);
        }
    }
}

/// The cached primary of a Sentinel set.
pub(super) struct Resolver {
    /// One resolution at a time: callers arriving meanwhile wait, then use its answer.
    sentinel: tokio::sync::Mutex<SentinelClient>,
    current: Mutex<Option<Node>>,
    epoch: AtomicU64,
    master_name: String,
    timeout: Duration,
}

impl Resolver {
    /// Checks the options; contacts no sentinel yet.
    pub(super) fn new(options: &SentinelOptions, trust: &Trust, timeout: Duration) -> Result<Self, StoreError> {
        if options.master_name.is_empty() {
            return Err(StoreError::config("store.sentinel.master_name is empty"));
        }
        if options.addresses.is_empty() {
            return Err(StoreError::config("store.sentinel.addresses names no sentinel"));
        }
        let addresses = options
            .addresses
            .iter()
            .map(|a| {
                sentinel_addr(a, options.tls)
                    .ok_or_else(|| StoreError::config(format!("sentinel address {a:?} is not host:port")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut builder = SentinelClientBuilder::new(addresses, &options.master_name, SentinelServerType::Master)
            .map_err(|e| StoreError::config_caused("store.sentinel is refused", e))?;
        if options.tls {
            builder =
                builder.set_client_to_redis_tls_mode(TlsMode::Secure).set_client_to_sentinel_tls_mode(TlsMode::Secure);
            // The sentinels and the primary they name are verified against the same trust.
            if let Some(certificates) = trust.certificates() {
                builder = builder
                    .set_client_to_redis_certificates(certificates.clone())
                    .set_client_to_sentinel_certificates(certificates);
            }
        }
        if let Some(user) = &options.username {
            builder = builder.set_client_to_redis_username(user);
        }
        if let Some(password) = &options.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(user) = &options.sentinel_username {
            builder = builder.set_client_to_sentinel_username(user);
        }
        if let Some(password) = &options.sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        let sentinel = builder.build().map_err(|e| StoreError::config_caused("store.sentinel is refused", e))?;
        Ok(Self {
            sentinel: tokio::sync::Mutex::new(sentinel),
            current: Mutex::new(None),
            epoch: AtomicU64::new(1),
            master_name: options.master_name.clone(),
            timeout,
        })
    }

    async fn node(&self) -> Result<Node, StoreError> {
        if let Some(node) = self.cached() {
            return Ok(node);
        }
        let millis = crate::clock::millis(self.timeout);
        let resolve = async {
            let mut sentinel = self.sentinel.lock().await;
            // Whoever held the lock before us may have resolved it already.
            if let Some(node) = self.cached() {
                return Ok(node);
            }
            let client = sentinel.async_get_client().await.map_err(|e| {
                StoreError::unavailable_caused(format!("no primary for {:?} from the sentinels", self.master_name), e)
            })?;
            let epoch = self.epoch.fetch_add(1, Ordering::AcqRel) + 1;
            let node = Node { client, epoch };
            tracing::info!(
                master = %self.master_name,
                address = %node.client.get_connection_info().addr(),
                "resolved the Redis primary through Sentinel"
            );
            *self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(node.clone());
            Ok(node)
        };
        tokio::time::timeout(self.timeout, resolve).await.map_err(|_| StoreError::Timeout { millis })?
    }

    fn cached(&self) -> Option<Node> {
        self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn retire(&self, epoch: u64) {
        let mut current = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.as_ref().is_some_and(|n| n.epoch == epoch) {
            tracing::warn!(master = %self.master_name, "the Redis primary failed or was demoted; resolving it again");
            *current = None;
        }
    }
}

/// `host:port` as a sentinel address (TLS or not).
fn sentinel_addr(address: &str, tls: bool) -> Option<ConnectionAddr> {
    let (host, port) = address.trim().rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port: u16 = port.parse().ok()?;
    if host.is_empty() || port == 0 {
        return None;
    }
    Some(if tls {
        ConnectionAddr::TcpTls { host: host.to_owned(), port, insecure: false, tls_params: None }
    } else {
        ConnectionAddr::Tcp(host.to_owned(), port)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sentinel_addresses_are_host_and_port() {
        assert!(
            matches!(sentinel_addr("10.0.0.1:26379", false), Some(ConnectionAddr::Tcp(h, 26379)) if h == "10.0.0.1")
        );
        assert!(matches!(sentinel_addr("[::1]:26379", false), Some(ConnectionAddr::Tcp(h, 26379)) if h == "::1"));
        assert!(matches!(sentinel_addr("s:1", true), Some(ConnectionAddr::TcpTls { port: 1, .. })));
        for bad in ["s", "s:", ":26379", "s:0", "s:port", "s:70000"] {
            assert!(sentinel_addr(bad, false).is_none(), "{bad} accepted");
        }
    }

    #[test]
    fn passwords_stay_out_of_debug_output() {
        let options = SentinelOptions {
            addresses: vec!["s:26379".to_owned()],
            master_name: "m".to_owned(),
            tls: false,
            username: None,
            password: Some("data-secret".to_owned()),
            sentinel_username: None,
            sentinel_password: Some("sentinel-secret".to_owned()),
        };
        let shown = format!("{options:?}");
        assert!(!shown.contains("secret"), "{shown}");
    }
}
