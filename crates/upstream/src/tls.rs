//! The TLS crypto provider of every HTTP client of the crate (upstreams, authorization
//! servers, token endpoints): reqwest is built without a bundled one, so ring is installed
//! once per process before the first client is built.

/// Installs ring as the process's default crypto provider (once; a provider installed before
/// is kept).
pub(crate) fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
