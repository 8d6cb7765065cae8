//! The suite's checks of the vault (versioned entries, listed without their values) and of
//! named locks (exclusive until released by their holder or lapsed).

use std::time::Duration;

use crate::contract::{Locks, Vault};
use crate::error::StoreError;
use crate::vault::{Expect, Put, VaultKey, VaultKind};

pub(super) async fn vault_entries_are_versioned_and_listed_without_their_values<S: Vault>(store: &S) {
    let ann = VaultKey::new(VaultKind::Connection, "iss\nann", "tracker");
    assert_eq!(store.vault_get(&ann).await.expect("get"), None);
    // A first connection; a second "first" one loses.
    let put = |key: &VaultKey, value: &'static str, expect: Expect| {
        let key = key.clone();
        async move { store.vault_put(&key, value, r#"{"issuer":"https://as"}"#, expect).await.expect("put") }
    };
    let saved = |put: Put| match put {
        Put::Saved { version } => version,
        Put::Conflict { current } => panic!("not written: {current:?}"),
    };
    let v1 = saved(put(&ann, "sealed-1", Expect::Absent).await);
    assert_eq!(put(&ann, "sealed-x", Expect::Absent).await, Put::Conflict { current: Some(v1) });
    let got = store.vault_get(&ann).await.expect("get").expect("an entry");
    assert_eq!((got.value.as_str(), got.version), ("sealed-1", v1));
    assert_eq!(got.meta, r#"{"issuer":"https://as"}"#);
    assert!(got.updated_ms > 0);
    // Two refreshes from version v1: one wins, the other learns the version it lost to.
    let v2 = saved(put(&ann, "sealed-2", Expect::Version(v1)).await);
    assert!(v2 > v1, "versions advance: {v1} then {v2}");
    assert_eq!(put(&ann, "sealed-3", Expect::Version(v1)).await, Put::Conflict { current: Some(v2) });
    assert_eq!(store.vault_get(&ann).await.expect("get").map(|e| e.value).as_deref(), Some("sealed-2"));
    let v3 = saved(put(&ann, "sealed-4", Expect::Any).await);
    assert!(v3 > v2);
    let missing = VaultKey::new(VaultKind::Connection, "iss\nann", "docs");
    assert_eq!(put(&missing, "x", Expect::Version(v1)).await, Put::Conflict { current: None });

    // Listed by kind and scope, in order, a page at a time, never with a value.
    for (scope, name) in [("iss\nben", "tracker"), ("iss\nann", "docs"), ("iss\nann", "wiki"), ("iss\nanna", "tracker")]
    {
        assert!(matches!(
            put(&VaultKey::new(VaultKind::Connection, scope, name), "v", Expect::Any).await,
            Put::Saved { .. }
        ));
    }
    let registration = VaultKey::new(VaultKind::Registration, "tracker", "https://as");
    assert!(matches!(put(&registration, "client", Expect::Absent).await, Put::Saved { .. }));
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..10 {
        let page = store.vault_list(VaultKind::Connection, None, cursor.as_deref(), 2).await.expect("list");
        assert!(page.entries.len() <= 2);
        seen.extend(page.entries.iter().map(|l| (l.scope.clone(), l.name.clone(), l.version == v3)));
        cursor = page.next;
        if cursor.is_none() {
            break;
        }
    }
    // (scope, name, whether it is at ann's tracker's last version)
    let expected = [
        ("iss\nann", "docs", false),
        ("iss\nann", "tracker", true),
        ("iss\nann", "wiki", false),
        ("iss\nanna", "tracker", false),
        ("iss\nben", "tracker", false),
    ];
    assert_eq!(seen, expected.map(|(s, n, v)| (s.to_owned(), n.to_owned(), v)), "every connection once, in order");
    let anns = store.vault_list(VaultKind::Connection, Some("iss\nann"), None, 10).await.expect("list");
    let names: Vec<&str> = anns.entries.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["docs", "tracker", "wiki"], "one scope only (not a scope it is the prefix of)");
    assert_eq!(anns.next, None);
    let regs = store.vault_list(VaultKind::Registration, None, None, 10).await.expect("list");
    assert_eq!(regs.entries.len(), 1, "kinds are apart");
    assert_eq!(regs.entries[0].meta, r#"{"issuer":"https://as"}"#);

    // Deleted: gone from reads and listings.
    assert!(store.vault_delete(&ann).await.expect("delete"));
    assert!(!store.vault_delete(&ann).await.expect("delete"), "deleting twice finds nothing");
    assert_eq!(store.vault_get(&ann).await.expect("get"), None);
    // Written anew after a delete, an entry never takes a version it had before: a refresh
    // that read the old connection cannot overwrite the new one (nor delete it).
    let again = saved(put(&ann, "sealed-new", Expect::Absent).await);
    assert!(again > v3, "a version is never reused for a key: {again} after {v3}");
    for old in [v1, v2, v3] {
        assert_eq!(put(&ann, "stale", Expect::Version(old)).await, Put::Conflict { current: Some(again) });
        assert!(!store.vault_delete_version(&ann, old).await.expect("delete"));
    }
    assert!(store.vault_delete(&ann).await.expect("delete"));
    let anns = store.vault_list(VaultKind::Connection, Some("iss\nann"), None, 10).await.expect("list");
    assert_eq!(anns.entries.len(), 2);
    // A delete at a version: not once the entry moved on (a connection written anew since).
    let wiki = VaultKey::new(VaultKind::Connection, "iss\nann", "wiki");
    let first = store.vault_get(&wiki).await.expect("get").expect("wiki").version;
    let second = saved(put(&wiki, "sealed-new", Expect::Version(first)).await);
    assert!(!store.vault_delete_version(&wiki, first).await.expect("delete"), "an older version is not deleted");
    assert_eq!(store.vault_get(&wiki).await.expect("get").map(|e| e.value).as_deref(), Some("sealed-new"));
    let none = VaultKey::new(VaultKind::Connection, "iss\nann", "none");
    assert!(!store.vault_delete_version(&none, 1).await.expect("delete"), "nothing to delete");
    assert!(store.vault_delete_version(&wiki, second).await.expect("delete"));
    assert_eq!(store.vault_get(&wiki).await.expect("get"), None);
    let anns = store.vault_list(VaultKind::Connection, Some("iss\nann"), None, 10).await.expect("list");
    assert_eq!(anns.entries.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["docs"], "unlisted too");
    // Keys that cannot be kept are refused, never truncated.
    for (scope, name) in [("", "x"), ("x", ""), ("a\u{0}b", "x"), ("x", &"n".repeat(2049))] {
        let bad = VaultKey::new(VaultKind::Connection, scope, name);
        assert!(matches!(store.vault_get(&bad).await, Err(StoreError::InvalidVaultKey)), "{scope:?}/{name:?}");
        assert!(matches!(store.vault_put(&bad, "v", "{}", Expect::Any).await, Err(StoreError::InvalidVaultKey)));
    }
}

pub(super) async fn locks_are_exclusive_until_released_or_lapsed<S: Locks>(store: &S) {
    let ttl = Duration::from_millis(400);
    assert!(store.try_lock("refresh:ann:tracker", "r1", ttl).await.expect("lock"));
    assert!(!store.try_lock("refresh:ann:tracker", "r2", ttl).await.expect("lock"), "held");
    assert!(store.try_lock("refresh:ben:tracker", "r2", ttl).await.expect("lock"), "another name is free");
    assert!(!store.unlock("refresh:ann:tracker", "r2").await.expect("unlock"), "not r2's to release");
    assert!(store.unlock("refresh:ann:tracker", "r1").await.expect("unlock"));
    assert!(store.try_lock("refresh:ann:tracker", "r2", ttl).await.expect("lock"), "free once released");
    // A holder that died holds it no longer than its time to live; its late release frees
    // nothing of the next holder's.
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    assert!(store.try_lock("refresh:ann:tracker", "r3", ttl).await.expect("lock"), "free once lapsed");
    assert!(!store.unlock("refresh:ann:tracker", "r2").await.expect("unlock"));
    assert!(!store.try_lock("refresh:ann:tracker", "r4", ttl).await.expect("lock"), "r3 still holds it");
}
