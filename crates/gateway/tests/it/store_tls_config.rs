//! `store.tls_ca_file`: read from the file and from its environment twin, and refused (naming
//! the setting and why) when no Redis connection uses TLS, when it cannot be read, or when it
//! holds no certificate.

use std::collections::HashMap;

use mcpgate::config::{Cli, load, load_from_str};

use crate::support::error_text;

const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
/// Only its form matters here: the store parses it; the tests in crates/store verify with it.
const PEM: &str = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";

/// `text` with the seal keys multi-replica mode needs.
fn with_keys(text: &str) -> String {
    format!("{text}[seal]\nkeys = [\"{KEY}\"]\n")
}

/// A CA bundle file holding `contents`, in a temp dir that lives as long as the result.
fn ca_file(contents: &str) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("ca.pem");
    std::fs::write(&path, contents).expect("write the CA bundle");
    (dir, path.to_str().expect("a UTF-8 temp path").to_owned())
}

#[test]
fn a_ca_file_applies_to_a_rediss_url_and_to_sentinel_tls() {
    let (_dir, path) = ca_file(PEM);
    let c = load_from_str(&with_keys(&format!(
        "redis_url = \"rediss://redis.internal:6380\"\n[store]\ntls_ca_file = \"{path}\"\n"
    )))
    .expect("valid");
    assert_eq!(c.store.tls_ca_file.as_deref(), Some(path.as_str()));

    let vars: HashMap<&str, &str> = [
        ("MCPGATE_SEAL_KEYS", KEY),
        ("MCPGATE_STORE_SENTINEL_MASTER_NAME", "mymaster"),
        ("MCPGATE_STORE_SENTINEL_ADDRESSES", "s1:26379"),
        ("MCPGATE_STORE_SENTINEL_TLS", "true"),
        ("MCPGATE_STORE_TLS_CA_FILE", path.as_str()),
    ]
    .into_iter()
    .collect();
    let c = load(&Cli::default(), &|k| vars.get(k).map(|v| (*v).to_owned())).expect("valid");
    assert_eq!(c.store.tls_ca_file.as_deref(), Some(path.as_str()));
}

#[test]
fn a_ca_file_without_tls_or_without_a_certificate_is_refused() {
    let (_dir, good) = ca_file(PEM);
    let (_other, empty) = ca_file("not a certificate\n");
    let missing = format!("{good}.missing");
    let cases = [
        (
            with_keys(&format!("redis_url = \"redis://r:6379\"\n[store]\ntls_ca_file = \"{good}\"\n")),
            "no Redis connection uses TLS",
        ),
        (
            with_keys(&format!(
                "[store]\ntls_ca_file = \"{good}\"\n[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\"]\n"
            )),
            "no Redis connection uses TLS",
        ),
        (format!("[store]\ntls_ca_file = \"{good}\"\n"), "no Redis connection uses TLS"),
        (with_keys(&format!("redis_url = \"rediss://r:6380\"\n[store]\ntls_ca_file = \"{missing}\"\n")), "cannot read"),
        (
            with_keys(&format!("redis_url = \"rediss://r:6380\"\n[store]\ntls_ca_file = \"{empty}\"\n")),
            "holds no PEM certificate",
        ),
    ];
    for (text, problem) in cases {
        let error = error_text(load_from_str(&text).expect_err(problem));
        assert!(error.contains("store.tls_ca_file") && error.contains(problem), "{problem}: {error}");
    }
}
