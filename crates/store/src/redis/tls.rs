//! Which certificates a TLS connection to Redis trusts, for every client the store builds:
//! the single server (`rediss://`), a cluster's seeds and the nodes they lead to, and a
//! Sentinel set (the sentinels and the primary they name).
//!
//! Invariant: every TLS connection verifies the server's certificate chain and host name.
//! The trust is the operator's CA bundle (`store.tls_ca_file`) when one is given, *instead
//! of* the system roots (a private CA is the reason to give one, and trusting every public
//! CA as well would let anyone with a public certificate for the name stand in for Redis);
//! otherwise the system roots. There is no mode that skips verification: a URL asking for
//! one (`#insecure`) is refused.

use redis::cluster::ClusterClientBuilder;
use redis::{Client, ConnectionAddr, IntoConnectionInfo as _, TlsCertificates};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use crate::error::StoreError;

/// The trust every TLS connection to Redis is verified against.
#[derive(Clone)]
pub(super) struct Trust {
    /// The operator's CA bundle (PEM), checked to hold at least one certificate; `None`
    /// means the system roots.
    ca_pem: Option<Vec<u8>>,
}

impl Trust {
    /// Checks the CA bundle, and makes sure rustls has its process-wide crypto provider
    /// before any connection needs it (the store may be used without the gateway, which
    /// installs the same one).
    pub(super) fn new(ca_pem: Option<Vec<u8>>) -> Result<Self, StoreError> {
        // Err means a provider is installed already; any one will do.
        let _ = rustls::crypto::ring::default_provider().install_default();
        if let Some(pem) = &ca_pem {
            let certificates = CertificateDer::pem_slice_iter(pem)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| StoreError::config_caused("store.tls_ca_file is not a PEM bundle", e))?;
            if certificates.is_empty() {
                return Err(StoreError::config("store.tls_ca_file holds no certificate (-----BEGIN CERTIFICATE-----)"));
            }
        }
        Ok(Self { ca_pem })
    }

    /// The certificates to hand to redis-rs, when the trust is not the system roots.
    pub(super) fn certificates(&self) -> Option<TlsCertificates> {
        self.ca_pem.as_ref().map(|pem| TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) })
    }

    /// A client for one server's URL (`redis://`, `rediss://` or `redis+unix://`).
    pub(super) fn client(&self, url: &str) -> Result<Client, StoreError> {
        let invalid = |e: redis::RedisError| StoreError::config_caused("invalid Redis URL", e);
        let info = url.into_connection_info().map_err(invalid)?;
        match (info.addr(), self.certificates()) {
            (ConnectionAddr::TcpTls { insecure: true, .. }, _) => Err(insecure_refused()),
            (ConnectionAddr::TcpTls { .. }, Some(certificates)) => {
                Client::build_with_tls(info, certificates).map_err(invalid)
            }
            _ => Client::open(info).map_err(invalid),
        }
    }

    /// A cluster client builder for the seed URLs, verifying every node it reaches the same
    /// way (the nodes it learns of are reached like the first seed: TLS or not).
    pub(super) fn cluster(&self, urls: Vec<String>) -> Result<ClusterClientBuilder, StoreError> {
        let invalid = |e: redis::RedisError| StoreError::config_caused("invalid Redis URL", e);
        let mut tls = false;
        for url in &urls {
            match url.as_str().into_connection_info().map_err(invalid)?.addr() {
                ConnectionAddr::TcpTls { insecure: true, .. } => return Err(insecure_refused()),
                ConnectionAddr::TcpTls { .. } => tls = true,
                _ => {}
            }
        }
        let builder = ClusterClientBuilder::new(urls);
        // Only for TLS seeds: handing certificates to the builder turns TLS on.
        Ok(match self.certificates() {
            Some(certificates) if tls => builder.certs(certificates),
            _ => builder,
        })
    }
}

fn insecure_refused() -> StoreError {
    StoreError::config(
        "a rediss:// URL with #insecure is refused: Redis's certificate is always verified \
         (trust a private CA with store.tls_ca_file)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_without_a_certificate_is_refused() {
        let error = Trust::new(Some(b"not a certificate".to_vec())).err().expect("refused");
        assert!(error.to_string().contains("no certificate"), "{error}");
    }

    #[test]
    fn unverified_tls_is_refused() {
        let trust = Trust::new(None).expect("system roots");
        let error = trust.client("rediss://127.0.0.1:6380/#insecure").expect_err("refused");
        assert!(error.to_string().contains("always verified"), "{error}");
        assert!(trust.cluster(vec!["rediss://127.0.0.1:7000/#insecure".to_owned()]).is_err());
        assert!(trust.client("rediss://127.0.0.1:6380").is_ok());
        assert!(trust.client("redis://127.0.0.1:6379").is_ok());
    }
}
