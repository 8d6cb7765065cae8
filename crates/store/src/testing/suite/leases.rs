//! The suite's checks of who runs a task: leases (taken, renewed, lapsed, stale), checkpoints,
//! attempts, deferrals and hand-backs, and the reclaim of jobs whose worker went silent.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use super::{LEASE, WAIT, asks, new_task, next_job};
use crate::contract::{JobQueue, TaskStore};
use crate::model::{
    Claim, Created, Job, Lease, NewTask, Read, Renewal, Settled, Skip, StatusNote, TaskOutcome, TaskRecord,
};

pub(super) async fn running_tasks_start_leased_and_are_taken_over_when_it_lapses<S: TaskStore + JobQueue>(store: &S) {
    // A task run where it was created (or a call promoted to a task): its worker holds the
    // first lease.
    let short = Duration::from_millis(300);
    let (record, lease, job) = running(store, new_task("promoted", 1), short).await;
    assert_eq!((record.status, record.attempts, lease.token), (TaskStatus::Working, 1, 1));
    // The same call again (an idempotent retry) finds it and runs nothing.
    let (again, run) = store.create_running(new_task("promoted", 1), "promoter", short).await.expect("create");
    assert!(matches!(&again, Created::Existing(r) if r.id == record.id) && run.is_none(), "{again:?}");
    assert_eq!(lease.entry, job.entry);
    // While the lease lives, a worker that claims the job anyway (a stale delivery) is told it
    // is busy, and the job, delivered to the promoter when it was created, is not read by
    // another worker. (Both checked early in the short lease.)
    assert!(matches!(store.claim(&job, "other", LEASE, 3).await.expect("claim"), Claim::Skip(Skip::Busy)));
    let seen = store.read("other", 10, Duration::from_millis(50)).await.expect("read");
    assert!(seen.iter().all(|j| j.task != record.id), "the running task's job went to another reader: {seen:?}");
    assert_eq!(
        store.renew(&lease, short, Some(&StatusNote::new("half way", Some(0.5)))).await.expect("renew"),
        Renewal::Held
    );
    // The promoter stops renewing (it died): the task is taken over and run again, attempt 2
    // (reclaimed at once, or enqueued by the reclaim for any worker to read).
    tokio::time::sleep(Duration::from_millis(700)).await;
    let reclaimed = store.reclaim("rescuer", Duration::from_millis(300), 10).await.expect("reclaim");
    let job = match reclaimed.into_iter().find(|j| j.task == record.id) {
        Some(job) => job,
        None => next_job(store, "rescuer", &record.id).await,
    };
    let Claim::Run { lease: taken, task } = store.claim(&job, "rescuer", LEASE, 3).await.expect("claim") else {
        panic!("a lapsed first lease can be taken over")
    };
    assert_eq!((taken.token, task.attempts), (2, 2));
    let outcome = TaskOutcome::Result("{}".to_owned());
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Completed, outcome.clone(), false).await.expect("finish"),
        Settled::Lost
    );
    assert_eq!(store.finish(&taken, &job, TaskStatus::Completed, outcome, false).await.expect("finish"), Settled::Done);
    // A promoted task whose promoter finishes in time completes under the first lease.
    let (record, lease, job) = running(store, new_task("promoted", 2), LEASE).await;
    let outcome = TaskOutcome::Result(r#"{"content":[]}"#.to_owned());
    assert_eq!(store.finish(&lease, &job, TaskStatus::Completed, outcome, false).await.expect("finish"), Settled::Done);
    let done = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!(done.status, TaskStatus::Completed);
}

/// Creates a task running on worker "promoter".
async fn running<S: TaskStore>(store: &S, task: NewTask, lease: Duration) -> (TaskRecord, Lease, Job) {
    match store.create_running(task, "promoter", lease).await.expect("create") {
        (Created::New(record), Some((lease, job))) => (record, lease, job),
        other => panic!("created anew and running: {other:?}"),
    }
}

pub(super) async fn stale_leases_cannot_write<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("reclaimed", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "dying", &record.id).await;
    let short = Duration::from_millis(150);
    let Claim::Run { lease: old, .. } = store.claim(&job, "dying", short, 3).await.expect("claim") else {
        panic!("runs")
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reclaimed = store.reclaim("rescuer", Duration::from_millis(100), 10).await.expect("reclaim");
    let job = reclaimed.into_iter().find(|j| j.task == record.id).expect("the dead worker's job is reclaimed");
    let Claim::Run { lease: new, task } = store.claim(&job, "rescuer", LEASE, 3).await.expect("claim") else {
        panic!("an expired lease can be taken over")
    };
    assert_eq!((new.token, task.attempts), (old.token + 1, 2));
    assert_eq!(store.renew(&old, LEASE, None).await.expect("renew"), Renewal::Lost);
    let outcome = TaskOutcome::Result("{}".to_owned());
    assert_eq!(
        store.finish(&old, &job, TaskStatus::Completed, outcome.clone(), false).await.expect("finish"),
        Settled::Lost
    );
    assert_eq!(store.finish(&new, &job, TaskStatus::Completed, outcome, false).await.expect("finish"), Settled::Done);
}

pub(super) async fn checkpoints_survive_the_run_that_wrote_them<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("tracker", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "dying", &record.id).await;
    let short = Duration::from_millis(150);
    let Claim::Run { lease: old, task } = store.claim(&job, "dying", short, 3).await.expect("claim") else {
        panic!("runs")
    };
    assert!(!task.resumable, "a fresh task has no checkpoint");
    let state = r#"{"upstreamTask":"u-1"}"#;
    assert_eq!(store.checkpoint(&old, state).await.expect("checkpoint"), Renewal::Held);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let reclaimed = store.reclaim("rescuer", Duration::from_millis(100), 10).await.expect("reclaim");
    let job = reclaimed.into_iter().find(|j| j.task == record.id).expect("the dead worker's job is reclaimed");
    let Claim::Run { lease: new, task } = store.claim(&job, "rescuer", LEASE, 3).await.expect("claim") else {
        panic!("taken over")
    };
    assert_eq!((task.attempts, task.resumable, task.state.as_deref()), (2, true, Some(state)));
    assert_eq!(store.checkpoint(&old, "{}").await.expect("checkpoint"), Renewal::Lost, "only the current lease");
    // Parking replaces the checkpoint with a round's continuation.
    let parked = store.park(&new, &job, &asks(&[("k", r#"{"m":1}"#)]), Some(r#"{"round":1}"#)).await;
    assert_eq!(parked.expect("park"), Settled::Done);
    let read = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!((read.resumable, read.state.as_deref()), (false, Some(r#"{"round":1}"#)));
}

pub(super) async fn attempts_run_out<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("unlucky", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let short = Duration::from_millis(100);
    assert!(matches!(store.claim(&job, "w1", short, 1).await.expect("claim"), Claim::Run { .. }));
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        store.claim(&job, "w2", short, 1).await.expect("claim"),
        Claim::Exhausted { tool: "slow_compute".to_owned() }
    );
    let failed = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!(failed.status, TaskStatus::Failed);
    let Some(TaskOutcome::Error(error)) = failed.outcome else { panic!("a clear error") };
    let error: serde_json::Value = serde_json::from_str(&error).expect("JSON error object");
    assert_eq!(error["code"], -32603);
    assert!(error["message"].as_str().expect("message").contains("stopped before finishing"), "{error}");
}

pub(super) async fn deferred_tasks_go_round_then_fail<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("deferred", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "old", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "old", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let error = r#"{"code":-32603,"message":"no replica knows tool slow_compute"}"#;
    assert_eq!(store.defer(&lease, &job, Duration::from_secs(60), error).await.expect("defer"), Settled::Done);
    // Any worker gets it again at once, the deferral not counted as an attempt.
    let again = next_job(store, "new", &record.id).await;
    let Claim::Run { lease, task } = store.claim(&again, "new", LEASE, 3).await.expect("claim") else {
        panic!("runs again")
    };
    assert_eq!(task.attempts, 1);
    // Past the grace period (counted from the first deferral) it fails with the error given.
    assert_eq!(store.defer(&lease, &again, Duration::ZERO, error).await.expect("defer"), Settled::GaveUp);
    let failed = store.get(&record.id, Read::WithOutcome).await.expect("get").expect("exists");
    assert_eq!(failed.status, TaskStatus::Failed);
    assert_eq!(failed.outcome, Some(TaskOutcome::Error(error.to_owned())));
}

pub(super) async fn handed_back_jobs_reach_another_worker<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("surplus", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "busy", &record.id).await;
    store.hand_back(std::slice::from_ref(&job)).await.expect("hand back");
    let taken = next_job(store, "idle", &record.id).await;
    assert_ne!(taken.entry, job.entry, "a fresh entry");
    assert!(matches!(store.claim(&taken, "idle", LEASE, 3).await.expect("claim"), Claim::Run { .. }));
    // The old entry is gone: reclaiming finds nothing of it.
    let reclaimed = store.reclaim("other", Duration::ZERO, 10).await.expect("reclaim");
    assert!(reclaimed.iter().all(|j| j.entry != job.entry), "{reclaimed:?}");
}

pub(super) async fn released_tasks_run_again_at_once<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("handover", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "leaving", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "leaving", LEASE, 1).await.expect("claim") else { panic!("runs") };
    // A reader already waiting gets the fresh job as soon as it is enqueued.
    let (read, released) = tokio::join!(store.read("staying", 10, WAIT), async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        store.release(&lease, &job).await
    });
    assert_eq!(released.expect("release"), Settled::Done);
    let released = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!((released.status, released.attempts), (TaskStatus::Working, 0), "the attempt does not count");
    // It runs again although only one attempt is allowed.
    let again = read.expect("read").into_iter().find(|j| j.task == record.id).expect("the waiting reader got the job");
    assert_ne!(again.entry, job.entry);
    let Claim::Run { lease: new, task } = store.claim(&again, "staying", LEASE, 1).await.expect("claim") else {
        panic!("a released task runs again at once")
    };
    assert_eq!((new.token, task.attempts), (lease.token + 1, 1));
    assert_eq!(store.release(&lease, &job).await.expect("release"), Settled::Lost, "only the holder releases");
    let outcome = TaskOutcome::Result("{}".to_owned());
    assert_eq!(store.finish(&new, &again, TaskStatus::Completed, outcome, false).await.expect("finish"), Settled::Done);
    assert_eq!(store.release(&new, &again).await.expect("release"), Settled::AlreadyTerminal);
}

pub(super) async fn renewed_jobs_are_not_reclaimed<S: TaskStore + JobQueue>(store: &S) {
    let record = store.create(new_task("longrun", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "busy", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "busy", LEASE, 3).await.expect("claim") else { panic!("runs") };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(store.renew(&lease, LEASE, None).await.expect("renew"), Renewal::Held);
    let idle = Duration::from_millis(300);
    let reclaimed = store.reclaim("other", idle, 10).await.expect("reclaim");
    assert!(reclaimed.iter().all(|j| j.task != record.id), "a renewed job is not idle: {reclaimed:?}");
    // Without renewals it is idle again after a while, and reclaimed.
    tokio::time::sleep(Duration::from_millis(400)).await;
    let reclaimed = store.reclaim("other", idle, 10).await.expect("reclaim");
    assert!(reclaimed.iter().any(|j| j.task == record.id), "{reclaimed:?}");
}

pub(super) async fn reclaim_reaches_every_pending_job<S: TaskStore + JobQueue>(store: &S) {
    let mut ids = std::collections::BTreeSet::new();
    for call in 0..6 {
        let record = store.create(new_task("many", call)).await.expect("create").record().expect("a task").clone();
        next_job(store, "vanished", &record.id).await;
        ids.insert(record.id);
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..ids.len() {
        let jobs = store.reclaim("rescuer", Duration::from_millis(300), 1).await.expect("reclaim");
        assert!(jobs.len() <= 1, "at most max: {jobs:?}");
        seen.extend(jobs.into_iter().map(|j| j.task));
    }
    assert_eq!(seen, ids, "one job per call, each in turn");
}
