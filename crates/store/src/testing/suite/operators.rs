//! The suite's checks of what operators configure and do: rate limits, task quotas (running,
//! retained, bytes), and the admin view (scan, purge).

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use super::{form_answers, new_task};
use crate::admin::{PurgeFilter, Purged};
use crate::contract::{RateLimits, TaskAdmin, TaskStore};
use crate::error::StoreError;
use crate::model::{Cancelled, Created, NewTask, Read};
use crate::quota::{Quota, QuotaKind};
use crate::rate::{Admission, Bucket};

pub(super) async fn an_admin_scan_sees_every_task_and_a_purge_deletes_only_ended_ones<S: TaskStore + TaskAdmin>(
    store: &S,
) {
    let mut ids = std::collections::BTreeSet::new();
    for (i, owner) in ["ann", "ann", "ben", "ben", "ben"].iter().enumerate() {
        let task = NewTask { idempotency: None, ..new_task(owner, u8::try_from(i).expect("small")) };
        match store.create(task).await.expect("create") {
            Created::New(record) => ids.insert(record.id),
            other => panic!("a new task: {other:?}"),
        };
    }
    // Every task, in small steps, whoever owns it; control fields only.
    let (mut seen, mut cursor, mut steps) = (std::collections::BTreeSet::new(), None::<String>, 0);
    loop {
        let page = store.scan(cursor.as_deref(), 2).await.expect("scan");
        for task in &page.tasks {
            assert!(task.arguments.is_empty(), "a scan reads no payloads");
            seen.insert(task.id.clone());
        }
        steps += 1;
        assert!(steps < 1000, "the scan ends");
        match page.next {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(seen, ids, "the scan saw every task");

    let mut ids = ids.into_iter();
    let (working, ended) = (ids.next().expect("a task"), ids.next().expect("another"));
    let owner = store.get(&ended, Read::Control).await.expect("get").expect("found").owner;
    assert!(matches!(store.cancel(&ended, &owner).await.expect("cancel"), Cancelled::Now(_)));
    let all = PurgeFilter {
        statuses: vec![TaskStatus::Completed, TaskStatus::Failed, TaskStatus::Cancelled],
        older_than_ms: 0,
    };
    assert_eq!(store.purge(&working, &all).await.expect("purge"), Purged::Live(TaskStatus::Working));
    assert!(store.get(&working, Read::Control).await.expect("get").is_some(), "a working task is kept");
    let completed_only = PurgeFilter { statuses: vec![TaskStatus::Completed], older_than_ms: 0 };
    assert_eq!(store.purge(&ended, &completed_only).await.expect("purge"), Purged::Skipped);
    let old_only = PurgeFilter { older_than_ms: 3_600_000, ..all.clone() };
    assert_eq!(store.purge(&ended, &old_only).await.expect("purge"), Purged::Skipped);
    match store.purge(&ended, &all).await.expect("purge") {
        Purged::Deleted { issuer, subject } => {
            assert_eq!((issuer.as_str(), subject.as_str()), ("https://issuer.example.com", owner.as_str()));
        }
        other => panic!("deleted: {other:?}"),
    }
    assert!(store.get(&ended, Read::Full).await.expect("get").is_none(), "purged");
    assert_eq!(store.purge(&ended, &all).await.expect("purge"), Purged::NotFound);
    store.forget_quota("ann", &ended).await.expect("forget quota");
    // A listing no longer shows it.
    let listed = store.list(&owner, None, 10).await.expect("list");
    assert!(listed.tasks.iter().all(|t| t.id != ended), "purged tasks are not listed");
}

pub(super) async fn the_bytes_quota_counts_creations_and_charged_results<S: TaskStore>(store: &S) {
    let quota = Quota { scope: "bytes-owner".to_owned(), max_running: 0, max_retained: 0, max_bytes: 100 };
    // Arguments of exactly `size` bytes, plus an answer and a state of 5 bytes each.
    let task = |call: u8, size: usize| NewTask {
        quota: Some(quota.clone()),
        idempotency: None,
        arguments: format!(r#"{{"p":"{}"}}"#, "x".repeat(size - 8)),
        input_responses: form_answers(&[("a", "\"yes\"")]),
        state: Some("\"s12\"".to_owned()),
        ..new_task("b", call)
    };
    let new = |created: Result<Created, StoreError>| match created.expect("create") {
        Created::New(record) => record,
        other => panic!("expected a new task: {other:?}"),
    };
    let a = new(store.create(task(1, 30)).await);
    assert_eq!(task(1, 30).payload_bytes(), 40, "arguments, answers and state count");
    // Its result is counted once recorded: 40 + 40 of 100.
    store.charge("bytes-owner", &a.id, 40).await.expect("charge");
    match store.create(task(2, 15)).await.expect_err("over the bytes quota") {
        StoreError::QuotaExceeded { kind: QuotaKind::Bytes, max: 100, retry_after_ms: Some(ms) } => {
            assert!(ms > 50_000 && ms <= 60_000, "until the oldest counted task expires: {ms} ms");
        }
        other => panic!("the bytes quota: {other:?}"),
    }
    // A task not counted under this quota charges nothing.
    let uncounted = new(store.create(NewTask { quota: None, ..task(3, 30) }).await);
    store.charge("bytes-owner", &uncounted.id, 1_000).await.expect("charge");
    new(store.create(task(4, 10)).await);
    assert!(matches!(store.create(task(5, 8)).await, Err(StoreError::QuotaExceeded { kind: QuotaKind::Bytes, .. })));
}

pub(super) async fn quotas_refuse_creations_until_tasks_end_or_expire<S: TaskStore>(store: &S) {
    let quota = Quota { scope: "quota-owner".to_owned(), max_running: 2, max_retained: 3, max_bytes: 0 };
    let task = |call: u8, keyed: bool| {
        let task = new_task("q", call);
        NewTask { quota: Some(quota.clone()), idempotency: if keyed { task.idempotency.clone() } else { None }, ..task }
    };
    let new = |created: Result<Created, StoreError>| match created.expect("create") {
        Created::New(record) => record,
        other => panic!("expected a new task: {other:?}"),
    };
    let a = new(store.create(task(1, true)).await);
    let b = new(store.create(task(2, false)).await);
    assert_eq!(
        store.create(task(3, false)).await.expect_err("over the running quota"),
        StoreError::QuotaExceeded { kind: QuotaKind::Running, max: 2, retry_after_ms: None }
    );
    // A retry of a call that made its task gets that task, at the quota or not.
    match store.create(task(1, true)).await.expect("retry") {
        Created::Existing(record) => assert_eq!(record.id, a.id),
        other => panic!("the retry gets its task: {other:?}"),
    }
    // An ended task no longer runs: its place is free.
    assert!(matches!(store.cancel(&b.id, "q").await.expect("cancel"), Cancelled::Now(_)));
    let c = new(store.create(task(4, false)).await);
    // Three retained (one running, two ended): the retained quota is full until one expires.
    assert!(matches!(store.cancel(&c.id, "q").await.expect("cancel"), Cancelled::Now(_)));
    match store.create(task(5, false)).await.expect_err("over the retained quota") {
        StoreError::QuotaExceeded { kind: QuotaKind::Retained, max: 3, retry_after_ms: Some(ms) } => {
            assert!(ms > 50_000 && ms <= 60_000, "until the oldest expires: {ms} ms");
        }
        other => panic!("the retained quota: {other:?}"),
    }
    // Another caller's quota is its own.
    let other = Quota { scope: "another".to_owned(), ..quota.clone() };
    new(store.create(NewTask { quota: Some(other), idempotency: None, ..new_task("q", 6) }).await);
}

pub(super) async fn rate_limits_admit_all_or_nothing_per_scope<S: RateLimits>(store: &S) {
    let bucket = |name: &str, burst, soft| Bucket::per_minute(name.to_owned(), 1, burst, soft);
    let admitted = Admission::Admitted { advice: Duration::ZERO };
    let calls = [bucket("calls", 2, false)];
    assert_eq!(store.admit("alice", &calls).await.expect("admit"), admitted);
    assert_eq!(store.admit("alice", &calls).await.expect("admit"), admitted);
    match store.admit("alice", &calls).await.expect("admit") {
        Admission::Refused { bucket: 0, retry_after } => {
            assert!(retry_after > Duration::from_secs(55) && retry_after <= Duration::from_secs(60), "{retry_after:?}");
        }
        other => panic!("the burst is spent: {other:?}"),
    }
    assert_eq!(store.admit("bob", &calls).await.expect("admit"), admitted, "scopes do not share buckets");

    // Refused by its second bucket, a request is charged to neither.
    let both = [bucket("tasks", 3, false), bucket("tasks:slow", 1, false)];
    assert_eq!(store.admit("carol", &both).await.expect("admit"), admitted);
    assert!(matches!(store.admit("carol", &both).await.expect("admit"), Admission::Refused { bucket: 1, .. }));
    let first = &both[..1];
    assert_eq!(store.admit("carol", first).await.expect("admit"), admitted);
    assert_eq!(store.admit("carol", first).await.expect("admit"), admitted, "the refused request cost nothing");
    assert!(matches!(store.admit("carol", first).await.expect("admit"), Admission::Refused { bucket: 0, .. }));

    // A soft bucket admits as many again past its burst, with advice, then refuses.
    let polls = [bucket("polls", 1, true)];
    assert_eq!(store.admit("dave", &polls).await.expect("admit"), admitted);
    match store.admit("dave", &polls).await.expect("admit") {
        Admission::Admitted { advice } => {
            assert!(advice > Duration::from_secs(55) && advice <= Duration::from_secs(60), "{advice:?}");
        }
        other => panic!("a soft bucket advises first: {other:?}"),
    }
    assert!(matches!(store.admit("dave", &polls).await.expect("admit"), Admission::Refused { bucket: 0, .. }));
    assert_eq!(store.admit("dave", &[]).await.expect("admit"), admitted, "no bucket, no limit");
}
