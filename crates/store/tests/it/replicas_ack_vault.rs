//! `store.replicas_ack` over the vault and the single-use marks, against a real primary and
//! its real replica: a vault write or delete and a single-use mark are answered once the
//! replica holds them (the write and `WAIT` in one round trip), each fails as
//! `NotAcknowledged` while the replica is frozen (a failover then could bring back a revoked
//! credential, lose a rotated refresh token or let a spent link be replayed), a mark that
//! failed so still counts as spent, and with 0 nothing waits.
//!
//! Nothing here depends on the machine's speed: the replica is checked to be stopped (its
//! process state) before a write it must not confirm, and after it is thawed the test waits,
//! bounded, for its replication offset to reach the primary's before asking anything of it.

use std::time::Duration;

use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::testing::{RedisReplicated, RedisServer};
use mcpgate_store::{
    Expect, OnceMarks as _, Put, RedisOptions, RedisStore, StoreError, Vault as _, VaultKey, VaultKind,
};

use crate::redis::{Monitor, options};
use crate::replicas_ack::Thaw;

/// How long anything here may take on a loaded machine (a bound, never a pause).
const PATIENCE: Duration = Duration::from_secs(30);

/// Options asking `replicas` replicas, each `WAIT` bounded by `wait`.
fn acked(server: &RedisServer, replicas: u32, wait: Duration) -> RedisOptions {
    RedisOptions {
        replicas_ack: replicas,
        replicas_ack_timeout: wait,
        command_timeout: wait + Duration::from_secs(5),
        ..options(server)
    }
}

async fn conn(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    redis::Client::open(server.url()).expect("url").get_multiplexed_async_connection().await.expect("connects")
}

/// A numeric field of `INFO <section>`.
async fn info(server: &RedisServer, section: &str, field: &str) -> Option<u64> {
    let text: String = redis::cmd("INFO").arg(section).query_async(&mut conn(server).await).await.expect("info");
    text.lines().find_map(|line| line.strip_prefix(field)?.strip_prefix(':')?.trim().parse().ok())
}

/// Freezes the replica and waits (bounded) until the kernel says it is stopped: from then on
/// it confirms nothing, however fast the primary is.
async fn freeze(replica: &RedisServer) -> Thaw<'_> {
    let pid = info(replica, "server", "process_id").await.expect("the replica's pid");
    replica.pause();
    let thaw = Thaw(replica);
    wait_every("the replica to be stopped", PATIENCE, Duration::from_millis(10), async || {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("/proc/<pid>/stat");
        // "<pid> (<comm>) <state> ...": the state follows the last ')'.
        let state = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next());
        if state == Some("T") { Look::Done(()) } else { Look::NotYet(stat) }
    })
    .await;
    thaw
}

/// The values of the vault entries of `prefix` as the replica has them (read on the replica).
async fn on_replica(replica: &RedisServer, prefix: &str) -> Vec<String> {
    let mut conn = conn(replica).await;
    let pattern = format!("{prefix}:{{{prefix}:vault}}:conn:*");
    let keys: Vec<String> = redis::cmd("KEYS").arg(&pattern).query_async(&mut conn).await.expect("keys");
    let mut values = Vec::new();
    for key in keys.iter().filter(|k| !k.ends_with(":index")) {
        let value: Option<String> = redis::cmd("HGET").arg(key).arg("value").query_async(&mut conn).await.expect("h");
        values.extend(value);
    }
    values
}

/// Unix ms a minute from now (a mark's expiry).
fn in_a_minute() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
    u64::try_from(now + 60_000).unwrap_or(u64::MAX)
}

fn alices() -> VaultKey {
    VaultKey::new(VaultKind::Connection, "alice", "files")
}

/// What the primary received since the last call: each command's name.
async fn sent(monitor: &mut Monitor) -> Vec<String> {
    let seen = monitor.commands_since_last().await;
    seen.iter().map(|line| line.split('"').nth(1).unwrap_or_default().to_ascii_uppercase()).collect()
}

fn names(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[tokio::test]
async fn vault_writes_and_single_use_marks_are_answered_once_the_replica_holds_them() {
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1, PATIENCE);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    let mut monitor = Monitor::start(set.primary().port()).await;
    let script_then_wait = names(&["EVALSHA", "SET", "WAIT"]);

    let Put::Saved { version } = store.vault_put(&alices(), "sealed-1", "{}", Expect::Absent).await.expect("put")
    else {
        panic!("saved")
    };
    assert_eq!(sent(&mut monitor).await, script_then_wait, "a vault write waits");
    // WAIT answered 1: the replica holds the entry now, not eventually.
    assert_eq!(on_replica(set.replica(), &opts.prefix).await, ["sealed-1"]);

    assert!(store.vault_get(&alices()).await.expect("get").is_some());
    assert_eq!(sent(&mut monitor).await.len(), 1, "a read waits for nothing");

    let put = store.vault_put(&alices(), "sealed-2", "{}", Expect::Version(version)).await.expect("put");
    let Put::Saved { version } = put else { panic!("saved: {put:?}") };
    assert_eq!(sent(&mut monitor).await, script_then_wait);
    assert_eq!(on_replica(set.replica(), &opts.prefix).await, ["sealed-2"]);
    assert!(store.vault_delete_version(&alices(), version).await.expect("delete at a version"));
    assert_eq!(sent(&mut monitor).await, script_then_wait, "a delete at a version waits");
    assert!(on_replica(set.replica(), &opts.prefix).await.is_empty(), "the replica has the delete");

    store.vault_put(&alices(), "sealed-3", "{}", Expect::Absent).await.expect("put");
    sent(&mut monitor).await;
    assert!(store.vault_delete(&alices()).await.expect("delete"));
    assert_eq!(sent(&mut monitor).await, script_then_wait, "a delete waits");
    assert!(on_replica(set.replica(), &opts.prefix).await.is_empty(), "the replica has the delete");

    let expires = in_a_minute();
    assert!(store.first_use("link-1", expires).await.expect("first use"));
    assert_eq!(sent(&mut monitor).await, names(&["SET", "WAIT"]), "a single-use mark waits");
    let mark = format!("{}:once:link-1", opts.prefix);
    let held: Option<String> =
        redis::cmd("GET").arg(&mark).query_async(&mut conn(set.replica()).await).await.expect("g");
    assert_eq!(held.as_deref(), Some("1"), "the replica holds the mark");
    assert!(!store.first_use("link-1", expires).await.expect("second use"), "used once");
}

#[tokio::test]
async fn vault_writes_and_single_use_marks_the_replica_cannot_confirm_fail() {
    let set = RedisReplicated::start();
    // A short WAIT: the frozen replica confirms nothing however long it is given.
    let store = RedisStore::connect(acked(set.primary(), 1, Duration::from_millis(300))).await.expect("connects");
    let refused = Some(StoreError::NotAcknowledged { wanted: 1, got: 0 });
    let expires = in_a_minute();

    let thaw = freeze(set.replica()).await;
    assert_eq!(store.vault_put(&alices(), "sealed-1", "{}", Expect::Absent).await.err(), refused, "a vault write");
    // It landed on the primary (only the replicas' confirmation is missing).
    let entry = store.vault_get(&alices()).await.expect("get").expect("on the primary");
    assert_eq!(store.vault_delete_version(&alices(), entry.version).await.err(), refused, "a delete at a version");
    assert_eq!(store.vault_put(&alices(), "sealed-2", "{}", Expect::Absent).await.err(), refused, "a vault write");
    assert_eq!(store.vault_delete(&alices()).await.err(), refused, "a delete");
    assert_eq!(store.first_use("link-2", expires).await.err(), refused, "a single-use mark");
    drop(thaw);
    set.wait_until_caught_up(PATIENCE);

    // The unconfirmed mark landed: the link is spent, never usable again.
    assert_eq!(store.first_use("link-2", expires).await, Ok(false), "an unconfirmed mark counts as spent");
    assert!(store.vault_get(&alices()).await.expect("get").is_none(), "the deletes landed too");
}

#[tokio::test]
async fn with_no_replicas_asked_vault_writes_and_marks_wait_for_nothing() {
    let set = RedisReplicated::start();
    let store = RedisStore::connect(acked(set.primary(), 0, Duration::ZERO)).await.expect("connects");
    let mut monitor = Monitor::start(set.primary().port()).await;
    let _thaw = freeze(set.replica()).await;
    store.vault_put(&alices(), "sealed-1", "{}", Expect::Absent).await.expect("put without waiting");
    assert_eq!(sent(&mut monitor).await, names(&["EVALSHA"]));
    assert!(store.vault_delete(&alices()).await.expect("delete without waiting"));
    assert_eq!(sent(&mut monitor).await, names(&["EVALSHA"]));
    assert!(store.first_use("link-3", in_a_minute()).await.expect("mark without waiting"));
    assert_eq!(sent(&mut monitor).await, names(&["SET"]));
}
