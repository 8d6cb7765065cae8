//! The suite's checks of the fleet's heartbeats: a beat is listed until it lapses or its
//! replica leaves, a refresh replaces it, the store stamps the write time, fields are cut to
//! their bound and the fleet is capped at `MAX_REPLICAS`.

use std::time::Duration;

use super::WAIT;
use crate::contract::Fleet;
use crate::fleet::{Heartbeat, MAX_FIELD_BYTES, MAX_REPLICAS};
use crate::testing::wait::wait_for;

const LIVE: Duration = Duration::from_secs(60);

fn beat(replica: &str, hash: &str) -> Heartbeat {
    Heartbeat {
        replica: replica.to_owned(),
        version: "1.2.3".to_owned(),
        config_hash: hash.to_owned(),
        started_ms: 1_700_000_000_000,
        tasks_running: 3,
        draining: false,
        written_ms: 7,
    }
}

fn replicas(beats: &[Heartbeat]) -> Vec<&str> {
    beats.iter().map(|b| b.replica.as_str()).collect()
}

pub(super) async fn heartbeats_list_live_replicas_until_they_leave_or_lapse<S: Fleet>(store: &S) {
    assert!(store.fleet().await.expect("fleet").is_empty());
    assert!(store.beat(&beat("b", "h1"), LIVE).await.expect("beat"));
    assert!(store.beat(&beat("a", "h1"), LIVE).await.expect("beat"));
    let fleet = store.fleet().await.expect("fleet");
    assert_eq!(replicas(&fleet), ["a", "b"], "by replica id");
    let a = &fleet[0];
    assert_eq!((a.version.as_str(), a.config_hash.as_str()), ("1.2.3", "h1"));
    assert_eq!((a.started_ms, a.tasks_running, a.draining), (1_700_000_000_000, 3, false));
    assert!(a.written_ms > 1_700_000_000_000, "the store stamps the write time: {a:?}");

    // A refresh replaces the record.
    let draining = Heartbeat { draining: true, tasks_running: 0, ..beat("a", "h2") };
    assert!(store.beat(&draining, LIVE).await.expect("beat"));
    let fleet = store.fleet().await.expect("fleet");
    assert_eq!(replicas(&fleet), ["a", "b"]);
    assert!(fleet[0].draining && fleet[0].tasks_running == 0 && fleet[0].config_hash == "h2", "{fleet:?}");

    // Leaving removes it at once (and again is harmless).
    store.leave("b").await.expect("leave");
    store.leave("b").await.expect("leave again");
    assert_eq!(replicas(&store.fleet().await.expect("fleet")), ["a"]);

    // A record not refreshed lapses (its lifetime long enough that the listing right after the
    // beat sees it on a busy box, short enough to lapse within the wait).
    assert!(store.beat(&beat("short", "h1"), Duration::from_secs(2)).await.expect("beat"));
    assert!(replicas(&store.fleet().await.expect("fleet")).contains(&"short"));
    wait_for("the unrefreshed record to lapse", WAIT, async || replicas(&store.fleet().await.expect("fleet")) == ["a"])
        .await;
}

pub(super) async fn heartbeats_are_bounded<S: Fleet>(store: &S) {
    let long = "é".repeat(MAX_FIELD_BYTES);
    let big = Heartbeat { version: long.clone(), config_hash: "x".repeat(10_000), ..beat("big", "") };
    assert!(store.beat(&big, LIVE).await.expect("beat"));
    let fleet = store.fleet().await.expect("fleet");
    let got = &fleet[0];
    assert_eq!(got.config_hash.len(), MAX_FIELD_BYTES);
    assert!(got.version.len() <= MAX_FIELD_BYTES && long.starts_with(&got.version), "cut at a char boundary");

    for i in 1..MAX_REPLICAS {
        assert!(store.beat(&beat(&format!("r{i:04}"), "h"), LIVE).await.expect("beat"));
    }
    assert!(!store.beat(&beat("one-too-many", "h"), LIVE).await.expect("beat"), "the fleet is full");
    assert!(store.beat(&beat("r0001", "h"), LIVE).await.expect("beat"), "a live replica still refreshes");
    let fleet = store.fleet().await.expect("fleet");
    assert_eq!(fleet.len(), MAX_REPLICAS);
    assert!(!replicas(&fleet).contains(&"one-too-many"));
    store.leave("big").await.expect("leave");
    assert!(store.beat(&beat("one-too-many", "h"), LIVE).await.expect("beat"), "room again");
}
