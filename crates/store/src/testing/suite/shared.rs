//! The suite's checks of what replicas share besides task records: task events and catalog
//! changes to every listener, single-use marks, and upstream lists with their generation.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use super::{WAIT, event};
use crate::contract::{EventBus, OnceMarks, UpstreamLists};
use crate::model::{TaskEvent, TaskId};
use crate::testing::wait::{Look, wait_every};

pub(super) async fn published_events_reach_subscribers<S: EventBus>(store: &S) {
    let id = TaskId::generate(7);
    let mut a = store.subscribe(&id).await.expect("subscribe");
    let mut b = store.subscribe(&id).await.expect("subscribe");
    store.publish(&id, TaskEvent::Status(TaskStatus::Working)).await.expect("publish");
    assert_eq!(event::<S>(&mut a).await, TaskEvent::Status(TaskStatus::Working));
    assert_eq!(event::<S>(&mut b).await, TaskEvent::Status(TaskStatus::Working));
    drop(a);
    store.publish(&id, TaskEvent::Status(TaskStatus::Completed)).await.expect("publish");
    assert_eq!(event::<S>(&mut b).await, TaskEvent::Status(TaskStatus::Completed), "one leaving does not stop others");
}

pub(super) async fn published_changes_reach_every_listener<S: EventBus>(store: &S) {
    let mut a = store.changes();
    let mut b = store.changes();
    // The Redis subscriber may still be connecting: publish until the first change arrives.
    // Each look waits up to 200 ms for the change itself.
    let first = wait_every("a published change to be delivered", WAIT, Duration::ZERO, async || {
        store.publish_change(&crate::change::Change::ToolsListChanged).await.expect("publish");
        match tokio::time::timeout(Duration::from_millis(200), a.recv()).await {
            Ok(Ok(crate::change::Change::Missed)) => Look::NotYet("a missed change".to_owned()),
            Err(_) => Look::NotYet("nothing within 200 ms".to_owned()),
            Ok(other) => Look::Done(other.expect("a change")),
        }
    })
    .await;
    assert_eq!(first, crate::change::Change::ToolsListChanged);
    let uri = crate::change::Change::ResourceUpdated("test://watched".to_owned());
    store.publish_change(&uri).await.expect("publish");
    let seen = async |rx: &mut tokio::sync::broadcast::Receiver<crate::change::Change>| loop {
        let change = tokio::time::timeout(WAIT, rx.recv()).await.expect("a change in time").expect("not closed");
        if let crate::change::Change::ResourceUpdated(u) = change {
            break u;
        }
    };
    assert_eq!(seen(&mut a).await, "test://watched");
    assert_eq!(seen(&mut b).await, "test://watched", "every listener gets every change");
}

pub(super) async fn marks_are_single_use<S: OnceMarks>(store: &S) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis();
    let until = u64::try_from(now).expect("ms") + 60_000;
    assert!(store.first_use("nonce-a", until).await.expect("mark"));
    assert!(!store.first_use("nonce-a", until).await.expect("mark"), "a replay is refused");
    assert!(store.first_use("nonce-b", until).await.expect("mark"), "marks are per id");
}

pub(super) async fn upstream_lists_are_shared_with_a_generation<S: UpstreamLists>(store: &S) {
    assert_eq!(store.lists_generation().await.expect("generation"), 0);
    assert_eq!(store.load_lists("files").await.expect("load"), None);
    let first = store.save_lists("files", r#"{"tools":[]}"#).await.expect("save");
    assert_eq!(store.lists_generation().await.expect("generation"), first);
    let second = store.save_lists("files", r#"{"tools":[{"name":"a"}]}"#).await.expect("save");
    assert!(second > first);
    assert_eq!(store.load_lists("files").await.expect("load").as_deref(), Some(r#"{"tools":[{"name":"a"}]}"#));
    assert_eq!(store.load_lists("other").await.expect("load"), None);
}
