//! The store over TLS to a real `redis-server` serving a certificate from a throwaway CA:
//! with that CA trusted (`tls_ca_pem`) the contract holds; without it, or with another CA, or
//! with a plain `redis://` to the TLS port, connecting fails, and says why.

use mcpgate_store::testing::{RedisServer, TestCa, run_suite};
use mcpgate_store::{RedisStore, StoreError};

use crate::redis::options;

/// A TLS server with its CA, and options that reach it over TLS trusting `trusted`.
fn tls_options(server: &RedisServer, trusted: Option<&TestCa>) -> mcpgate_store::RedisOptions {
    let mut options = options(server);
    options.url = server.tls_url();
    options.tls_ca_pem = trusted.map(TestCa::ca_pem);
    options
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_over_tls_trusting_the_servers_ca_honours_the_contract() {
    let ca = TestCa::generate();
    let server = RedisServer::builder().tls(&ca).start();
    run_suite(|| async {
        RedisStore::connect(tls_options(&server, Some(&ca))).await.expect("connects over TLS trusting the test CA")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_from_an_untrusted_ca_is_refused() {
    let ca = TestCa::generate();
    let server = RedisServer::builder().tls(&ca).start();
    let stranger = TestCa::generate();
    // The system roots (no CA given) and a CA given instead of them (not the server's).
    for (trusted, what) in [(None, "the system roots"), (Some(&stranger), "another CA")] {
        let error = RedisStore::connect(tls_options(&server, trusted)).await.expect_err(what);
        assert!(matches!(error, StoreError::Unavailable { .. }), "{what}: {error:?}");
        // The TLS error is kept as a source: read the whole chain.
        let chain = std::iter::successors(Some(&error as &dyn std::error::Error), |e| e.source());
        let text = chain.map(ToString::to_string).collect::<Vec<_>>().join(": ");
        // UnknownIssuer for the system roots; BadSignature for a CA of the same name.
        assert!(text.contains("invalid peer certificate"), "{what}: {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_redis_to_the_tls_port_fails() {
    let ca = TestCa::generate();
    let server = RedisServer::builder().tls(&ca).start();
    let mut plain = tls_options(&server, None);
    plain.url = format!("redis://127.0.0.1:{}", server.tls_port());
    let error = RedisStore::connect(plain).await.expect_err("plain text to a TLS port");
    assert!(matches!(error, StoreError::Unavailable { .. } | StoreError::Timeout { .. }), "{error:?}");
}

#[tokio::test]
async fn a_ca_bundle_without_a_certificate_is_a_config_error() {
    let server = RedisServer::start();
    let mut options = options(&server);
    options.tls_ca_pem = Some(b"-----BEGIN NOTHING-----\n".to_vec());
    let error = RedisStore::connect(options).await.expect_err("no certificate in the bundle");
    assert!(matches!(error, StoreError::Config { .. }), "{error:?}");
}
