//! `[store.sentinel]`: its keys from a file and from their environment twins, multi-replica
//! mode, the combinations refused (each naming the setting and why), and its passwords kept
//! out of errors and `Debug`.

use std::collections::HashMap;

use mcpgate::config::{Cli, load, load_from_str};

use crate::support::error_text;

const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const PASSWORD: &str = "s3ntinel-pa55word-not-to-leak";

/// `text` (top-level keys and `[store…]` tables) with the seal keys multi-replica mode needs.
fn with_keys(text: &str) -> String {
    format!("{text}[seal]\nkeys = [\"{KEY}\"]\n")
}

#[test]
fn a_sentinel_table_is_a_multi_replica_store() {
    let c = load_from_str(&with_keys(
        "[store.sentinel]\nmaster_name = \"mymaster\"\naddresses = [\"10.0.0.1:26379\", \"s2:26379\"]\n",
    ))
    .expect("valid");
    assert!(c.is_multi_replica() && c.redis_url.is_none());
    let sentinel = c.store.sentinel.expect("the table");
    assert_eq!(sentinel.master_name, "mymaster");
    assert_eq!(sentinel.addresses, ["10.0.0.1:26379", "s2:26379"]);
    assert!(!sentinel.tls && sentinel.password.is_none());
}

#[test]
fn the_environment_twins_configure_sentinel() {
    let vars: HashMap<&str, &str> = [
        ("MCPGATE_SEAL_KEYS", KEY),
        ("MCPGATE_STORE_SENTINEL_MASTER_NAME", "mymaster"),
        ("MCPGATE_STORE_SENTINEL_ADDRESSES", "s1:26379, s2:26379,s3:26379"),
        ("MCPGATE_STORE_SENTINEL_TLS", "true"),
        ("MCPGATE_STORE_SENTINEL_USERNAME", "app"),
        ("MCPGATE_STORE_SENTINEL_PASSWORD", PASSWORD),
        ("MCPGATE_STORE_SENTINEL_SENTINEL_PASSWORD", PASSWORD),
    ]
    .into_iter()
    .collect();
    let c = load(&Cli::default(), &|k| vars.get(k).map(|v| (*v).to_owned())).expect("valid");
    assert!(c.is_multi_replica());
    let sentinel = c.store.sentinel.as_ref().expect("the table");
    assert_eq!(sentinel.addresses, ["s1:26379", "s2:26379", "s3:26379"]);
    assert!(sentinel.tls);
    assert_eq!(sentinel.username.as_deref(), Some("app"));
    assert_eq!(sentinel.password.as_ref().map(|p| p.expose()), Some(PASSWORD));
    assert!(!format!("{c:?}").contains(PASSWORD), "Debug redacts the passwords");
}

#[test]
fn bad_sentinel_combinations_are_refused_with_a_precise_message() {
    let cases = [
        (
            with_keys(
                "redis_url = \"redis://r:6379\"\n[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\"]\n",
            ),
            ("store.sentinel", "redis_url and store.sentinel are exclusive"),
        ),
        (
            with_keys("[store]\ncluster = true\n[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\"]\n"),
            ("store.sentinel", "store.cluster and store.sentinel are exclusive"),
        ),
        (
            with_keys("[store.sentinel]\naddresses = [\"s:26379\"]\n"),
            ("store.sentinel.master_name", "required with [store.sentinel]"),
        ),
        (with_keys("[store.sentinel]\nmaster_name = \"m\"\n"), ("store.sentinel.addresses", "at least one sentinel")),
        (
            with_keys("[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\", \"s2\"]\n"),
            ("store.sentinel.addresses", "\"s2\" is not host:port"),
        ),
        (
            with_keys(&format!(
                "[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:0\"]\npassword = \"{PASSWORD}\"\n"
            )),
            ("store.sentinel.addresses", "\"s:0\" is not host:port"),
        ),
        (
            "[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\"]\n".to_owned(),
            ("seal.keys", "required when redis_url or store.sentinel is set"),
        ),
        (
            with_keys("[store.sentinel]\nmaster_name = \"m\"\naddresses = [\"s:26379\"]\nport = 26379\n"),
            ("store.sentinel.port", "unknown setting"),
        ),
    ];
    for (text, (setting, problem)) in cases {
        let err = error_text(load_from_str(&text).expect_err(problem));
        assert!(err.contains(setting) && err.contains(problem), "expected {setting} and {problem:?} in {err:?}");
        assert!(!err.contains(PASSWORD), "a password leaked into {err:?}");
    }
}
