//! The suite's checks of a task's record from its creation to its end: idempotent creation,
//! pages by owner, a run to completion (with its events), failure, cancellation, settling once,
//! and the end of its lifetime.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use super::{LEASE, event, new_task, next_job};
use crate::contract::{EventBus, JobQueue, TaskStore};
use crate::model::{
    Cancelled, Claim, Created, Read, Renewal, Settled, Skip, StatusNote, TaskEvent, TaskId, TaskOutcome,
};

pub(super) async fn create_get_and_idempotency<S: TaskStore>(store: &S) {
    let created = store.create(new_task("alice", 1)).await.expect("create");
    let Created::New(record) = created else { panic!("a new task") };
    assert_eq!(record.status, TaskStatus::Working);
    assert_eq!(record.attempts, 0);
    let got = store.get(&record.id, Read::Full).await.expect("get").expect("durable when create returns");
    assert_eq!(got.id, record.id);
    assert_eq!(got.owner, "alice");
    assert_eq!(got.arguments, r#"{"seconds":1}"#);
    assert_eq!(got.ttl_ms, Some(60_000));
    assert_eq!(got.created_ms, record.created_ms);

    let again = store.create(new_task("alice", 1)).await.expect("create");
    assert!(matches!(&again, Created::Existing(r) if r.id == record.id), "same call → same task: {again:?}");
    let other = store.create(new_task("alice", 2)).await.expect("create");
    assert!(matches!(&other, Created::New(r) if r.id != record.id));

    assert!(store.get(&TaskId::generate(0), Read::Full).await.expect("get").is_none());

    // The same scope for another call is refused, and creates nothing.
    let mut reused = new_task("alice", 1);
    reused.idempotency.as_mut().expect("new_task gives every call a scope").call = [99; 32];
    assert_eq!(store.create(reused).await.expect("create"), Created::KeyReused);
    // Without a scope every creation is a new task.
    let mut plain = new_task("alice", 1);
    plain.idempotency = None;
    let a = store.create(plain.clone()).await.expect("create");
    let b = store.create(plain).await.expect("create");
    assert!(matches!((&a, &b), (Created::New(x), Created::New(y)) if x.id != y.id), "{a:?} {b:?}");
    // A control read carries what renders a status, never the payload.
    let control = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!(control.status, TaskStatus::Working);
    assert!(control.arguments.is_empty() && control.capabilities.is_empty(), "{control:?}");
    assert_eq!(got.scopes, ["tasks:run", "reports"], "the creator's scopes are kept");
    assert_eq!(got.server, None, "created through the root endpoint");
    // The virtual server a task was created through is on every read (it decides who sees it).
    let mut served = new_task("alice", 3);
    served.server = Some("ops".to_owned());
    let served = store.create(served).await.expect("create").record().expect("a task").id.clone();
    for read in [Read::Control, Read::WithOutcome, Read::Full] {
        let got = store.get(&served, read).await.expect("get").expect("exists");
        assert_eq!(got.server.as_deref(), Some("ops"), "{read:?}");
    }
}

pub(super) async fn list_pages_by_owner<S: TaskStore>(store: &S) {
    let mut ids = Vec::new();
    for call in 0..5 {
        ids.push(store.create(new_task("lister", call)).await.expect("create").record().expect("a task").id.clone());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    store.create(new_task("someone-else", 9)).await.expect("create");
    let first = store.list("lister", None, 2).await.expect("list");
    assert_eq!(first.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), ids[..2], "oldest first");
    let cursor = first.next.expect("more pages");
    let second = store.list("lister", Some(&cursor), 2).await.expect("list");
    assert_eq!(second.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), ids[2..4]);
    let third = store.list("lister", second.next.as_ref(), 2).await.expect("list");
    assert_eq!(third.tasks.iter().map(|t| t.id.clone()).collect::<Vec<_>>(), ids[4..]);
    assert!(third.next.is_none());
    assert!(store.list("nobody", None, 10).await.expect("list").tasks.is_empty());
}

pub(super) async fn run_to_completion_with_events<S: TaskStore + JobQueue + EventBus>(store: &S) {
    let record = store.create(new_task("runner", 1)).await.expect("create").record().expect("a task").clone();
    let mut sub = store.subscribe(&record.id).await.expect("subscribe");
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, task } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    assert_eq!((lease.token, task.attempts), (1, 1));
    assert_eq!(store.claim(&job, "w2", LEASE, 3).await.expect("claim"), Claim::Skip(Skip::Busy), "live lease");
    assert_eq!(store.renew(&lease, LEASE, Some(&StatusNote::text("halfway"))).await.expect("renew"), Renewal::Held);
    let got = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!((got.status_message.as_deref(), got.progress_ppm), (Some("halfway"), None));
    // A fraction is kept until another replaces it; a plain message leaves it.
    let note = StatusNote::new("two thirds", Some(2.0 / 3.0));
    assert_eq!(store.renew(&lease, LEASE, Some(&note)).await.expect("renew"), Renewal::Held);
    let got = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!((got.status_message.as_deref(), got.progress_ppm), (Some("two thirds"), Some(666_667)));
    assert_eq!(store.renew(&lease, LEASE, Some(&StatusNote::text("almost"))).await.expect("renew"), Renewal::Held);
    let got = store.get(&record.id, Read::WithOutcome).await.expect("get").expect("exists");
    assert_eq!((got.status_message.as_deref(), got.progress_ppm), (Some("almost"), Some(666_667)));
    let outcome = TaskOutcome::Result(r#"{"content":[]}"#.to_owned());
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Completed, outcome.clone(), false).await.expect("finish"),
        Settled::Done
    );
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::Completed));
    let done = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!((done.status, done.outcome), (TaskStatus::Completed, Some(outcome.clone())));
    // The last note described a step of the run, not its end: gone; the progress is complete.
    assert_eq!((done.status_message.as_deref(), done.progress_ppm), (None, Some(1_000_000)), "no stale progress");
    // A terminal task never changes again, and its job is gone.
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Failed, outcome, false).await.expect("finish"),
        Settled::AlreadyTerminal
    );
    assert_eq!(store.claim(&job, "w1", LEASE, 3).await.expect("claim"), Claim::Skip(Skip::Terminal));
    assert!(
        store.reclaim("w3", Duration::ZERO, 10).await.expect("reclaim").is_empty(),
        "acknowledged jobs never return"
    );
}

pub(super) async fn a_failed_run_keeps_how_far_it_got<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("faller", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let note = StatusNote::new("Compiled section 1 of 2", Some(0.5));
    assert_eq!(store.renew(&lease, LEASE, Some(&note)).await.expect("renew"), Renewal::Held);
    let error = TaskOutcome::Error(r#"{"code":-32603,"message":"x"}"#.to_owned());
    assert_eq!(store.finish(&lease, &job, TaskStatus::Failed, error, false).await.expect("finish"), Settled::Done);
    let failed = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!((failed.status_message.as_deref(), failed.progress_ppm), (None, Some(500_000)), "no stale message");
}

pub(super) async fn cancel_is_idempotent_and_final<S: TaskStore + JobQueue + EventBus>(store: &S) {
    let record = store.create(new_task("canceller", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let mut sub = store.subscribe(&record.id).await.expect("subscribe");
    assert_eq!(store.cancel(&record.id, "intruder").await.expect("cancel"), Cancelled::NotFound, "owner only");
    let Cancelled::Now(cancelled) = store.cancel(&record.id, "canceller").await.expect("cancel") else {
        panic!("cancels")
    };
    assert_eq!(cancelled.status, TaskStatus::Cancelled);
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::Cancelled));
    assert!(matches!(store.cancel(&record.id, "canceller").await.expect("cancel"), Cancelled::AlreadyTerminal(_)));
    assert_eq!(store.renew(&lease, LEASE, None).await.expect("renew"), Renewal::Cancelled, "the worker learns it");
    let late = TaskOutcome::Result("{}".to_owned());
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Completed, late, false).await.expect("finish"),
        Settled::AlreadyTerminal,
        "a late finish cannot overwrite cancelled"
    );
    assert_eq!(store.get(&record.id, Read::Full).await.expect("get").expect("exists").status, TaskStatus::Cancelled);
    assert_eq!(store.cancel(&TaskId::generate(3), "canceller").await.expect("cancel"), Cancelled::NotFound);
}

pub(super) async fn settling_twice_writes_once<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("twice", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let result = TaskOutcome::Result(r#"{"content":[],"isError":true}"#.to_owned());
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Completed, result.clone(), true).await.expect("finish"),
        Settled::Done
    );
    // The repeat of a finish whose reply was lost: the outcome stays the first one.
    let other = TaskOutcome::Error(r#"{"code":-32603,"message":"x"}"#.to_owned());
    let repeat = store.finish(&lease, &job, TaskStatus::Failed, other, false).await.expect("finish");
    assert!(matches!(repeat, Settled::Done | Settled::AlreadyTerminal), "{repeat:?}");
    let done = store.get(&record.id, Read::WithOutcome).await.expect("get").expect("exists");
    assert_eq!((done.status, done.outcome, done.tool_error), (TaskStatus::Completed, Some(result), true));
    let control = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert!(control.outcome.is_none() && control.tool_error, "a control read knows the tool error, not the result");
}

pub(super) async fn lifetime_ends<S: TaskStore + JobQueue>(store: &S) {
    let mut task = new_task("ephemeral", 1);
    task.ttl_ms = Some(300);
    let record = store.create(task).await.expect("create").record().expect("a task").clone();
    assert!(store.get(&record.id, Read::Full).await.expect("get").is_some());
    let job = next_job(store, "w1", &record.id).await;
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(store.get(&record.id, Read::Full).await.expect("get").is_none(), "gone after its lifetime");
    assert_eq!(store.claim(&job, "w1", LEASE, 3).await.expect("claim"), Claim::Skip(Skip::Gone));
    assert_eq!(store.cancel(&record.id, "ephemeral").await.expect("cancel"), Cancelled::NotFound);
    let mut unlimited = new_task("ephemeral", 2);
    unlimited.ttl_ms = None;
    let record = store.create(unlimited).await.expect("create").record().expect("a task").clone();
    assert_eq!(store.get(&record.id, Read::Full).await.expect("get").expect("exists").ttl_ms, None);
}
