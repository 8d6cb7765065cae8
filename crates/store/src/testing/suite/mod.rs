//! The store conformance suite: every clause of the `TaskStore`, `JobQueue` and `EventBus`
//! contracts, run against a fresh store per check (the memory store, and Redis with a fresh
//! key prefix).

mod operators;
mod pins;
mod vault;

use std::future::Future;
use std::time::Duration;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;

use super::wait::{Look, wait_every};
use crate::contract::{EventBus, JobQueue, Locks, OnceMarks, RateLimits, TaskAdmin, TaskStore, UpstreamLists, Vault};
use crate::model::{
    Answered, Cancelled, CheckedAnswer, CheckedAnswers, Claim, Created, Idempotency, Job, Lease, NewTask, RawAnswer,
    RawAnswers, RawByKey, RawRequests, Read, Renewal, Settled, Skip, StatusNote, TaskEvent, TaskId, TaskOutcome,
    TaskRecord,
};

const LEASE: Duration = Duration::from_secs(30);
const WAIT: Duration = Duration::from_secs(5);

/// Answers may hold this many bytes per task in the suite.
const MAX_ANSWER_BYTES: u64 = 1 << 20;

fn new_task(owner: &str, call: u8) -> NewTask {
    let mut scope = [0u8; 32];
    scope[0] = call;
    scope[1..1 + owner.len().min(31)].copy_from_slice(&owner.as_bytes()[..owner.len().min(31)]);
    NewTask {
        owner: owner.to_owned(),
        issuer: "https://issuer.example.com".to_owned(),
        subject: owner.to_owned(),
        era: Era::Modern,
        tool: "slow_compute".to_owned(),
        arguments: r#"{"seconds":1}"#.to_owned(),
        capabilities: "{}".to_owned(),
        ttl_ms: Some(60_000),
        poll_interval_ms: 500,
        scopes: vec!["tasks:run".to_owned(), "reports".to_owned()],
        idempotency: Some(Idempotency { scope, call: [call; 32], window_ms: 60_000 }),
        index_horizon_ms: Some(3_600_000),
        indexed: true,
        quota: None,
        input_responses: RawAnswers::new(),
        state: None,
        credential: None,
        trace: None,
        server: None,
    }
}

/// Recorded answers to form requests.
fn form_answers(pairs: &[(&str, &str)]) -> RawAnswers {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), RawAnswer { method: "elicitation/create".to_owned(), json: (*v).to_owned() }))
        .collect()
}

fn raw(pairs: &[(&str, &str)]) -> RawByKey {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

/// Form requests to park with.
fn asks(pairs: &[(&str, &str)]) -> RawRequests {
    form_answers(pairs)
}

/// Answers as the gateway hands them over: each with the methods it is a result of.
fn checked(pairs: &[(&str, &str, &[&'static str])]) -> CheckedAnswers {
    pairs
        .iter()
        .map(|(k, json, fits)| ((*k).to_owned(), CheckedAnswer { fits: fits.to_vec(), json: (*json).to_owned() }))
        .collect()
}

const FORM: &[&str] = &["elicitation/create"];

async fn next_job<S: JobQueue>(store: &S, worker: &str, task: &TaskId) -> Job {
    // Each read blocks up to 200 ms itself.
    wait_every(format_args!("a job for {task}"), WAIT, Duration::ZERO, async || {
        let jobs = store.read(worker, 10, Duration::from_millis(200)).await.expect("read");
        jobs.iter().find(|j| &j.task == task).cloned().map_or_else(|| Look::not_yet(jobs), Look::Done)
    })
    .await
}

async fn event<S: EventBus>(sub: &mut crate::events::Subscription) -> TaskEvent {
    let _ = std::marker::PhantomData::<S>;
    tokio::time::timeout(WAIT, sub.next()).await.expect("an event in time")
}

/// Runs every check, each against a store made by `make`.
pub async fn run_suite<S, F, Fut>(make: F)
where
    S: TaskStore + JobQueue + EventBus + OnceMarks + UpstreamLists + RateLimits + TaskAdmin + Vault + Locks,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    create_get_and_idempotency(&make().await).await;
    list_pages_by_owner(&make().await).await;
    run_to_completion_with_events(&make().await).await;
    a_failed_run_keeps_how_far_it_got(&make().await).await;
    cancel_is_idempotent_and_final(&make().await).await;
    stale_leases_cannot_write(&make().await).await;
    checkpoints_survive_the_run_that_wrote_them(&make().await).await;
    attempts_run_out(&make().await).await;
    lifetime_ends(&make().await).await;
    park_waits_for_input(&make().await).await;
    held_tasks_resume_in_place_while_their_lease_lives(&make().await).await;
    published_events_reach_subscribers(&make().await).await;
    published_changes_reach_every_listener(&make().await).await;
    released_tasks_run_again_at_once(&make().await).await;
    renewed_jobs_are_not_reclaimed(&make().await).await;
    reclaim_reaches_every_pending_job(&make().await).await;
    answers_gathered_before_creation_reach_the_first_run(&make().await).await;
    marks_are_single_use(&make().await).await;
    settling_twice_writes_once(&make().await).await;
    deferred_tasks_go_round_then_fail(&make().await).await;
    handed_back_jobs_reach_another_worker(&make().await).await;
    running_tasks_start_leased_and_are_taken_over_when_it_lapses(&make().await).await;
    upstream_lists_are_shared_with_a_generation(&make().await).await;
    operators::rate_limits_admit_all_or_nothing_per_scope(&make().await).await;
    operators::quotas_refuse_creations_until_tasks_end_or_expire(&make().await).await;
    operators::the_bytes_quota_counts_creations_and_charged_results(&make().await).await;
    operators::an_admin_scan_sees_every_task_and_a_purge_deletes_only_ended_ones(&make().await).await;
    vault::vault_entries_are_versioned_and_listed_without_their_values(&make().await).await;
    vault::locks_are_exclusive_until_released_or_lapsed(&make().await).await;
}

/// Runs the checks of pinned tool definitions, each against a store made by `make` (apart
/// from `run_suite`, so a change to pinning runs only these).
pub async fn run_pins_suite<S, F, Fut>(make: F)
where
    S: crate::contract::Pins,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    pins::first_seen_seeds_once_however_replicas_race(&make().await).await;
    pins::approvals_name_the_hash_the_operator_saw(&make().await).await;
    pins::changed_tools_outrank_new_ones_and_stubs_are_never_approved(&make().await).await;
}

async fn upstream_lists_are_shared_with_a_generation<S: UpstreamLists>(store: &S) {
    assert_eq!(store.lists_generation().await.expect("generation"), 0);
    assert_eq!(store.load_lists("files").await.expect("load"), None);
    let first = store.save_lists("files", r#"{"tools":[]}"#).await.expect("save");
    assert_eq!(store.lists_generation().await.expect("generation"), first);
    let second = store.save_lists("files", r#"{"tools":[{"name":"a"}]}"#).await.expect("save");
    assert!(second > first);
    assert_eq!(store.load_lists("files").await.expect("load").as_deref(), Some(r#"{"tools":[{"name":"a"}]}"#));
    assert_eq!(store.load_lists("other").await.expect("load"), None);
}

async fn running_tasks_start_leased_and_are_taken_over_when_it_lapses<S: TaskStore + JobQueue>(store: &S) {
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

async fn a_failed_run_keeps_how_far_it_got<S: TaskStore + JobQueue>(store: &S) {
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

async fn settling_twice_writes_once<S: TaskStore + JobQueue>(store: &S) {
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

async fn deferred_tasks_go_round_then_fail<S: TaskStore + JobQueue>(store: &S) {
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

async fn handed_back_jobs_reach_another_worker<S: TaskStore + JobQueue>(store: &S) {
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

async fn create_get_and_idempotency<S: TaskStore>(store: &S) {
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

async fn list_pages_by_owner<S: TaskStore>(store: &S) {
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

async fn run_to_completion_with_events<S: TaskStore + JobQueue + EventBus>(store: &S) {
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

async fn cancel_is_idempotent_and_final<S: TaskStore + JobQueue + EventBus>(store: &S) {
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

async fn stale_leases_cannot_write<S: TaskStore + JobQueue>(store: &S) {
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

async fn checkpoints_survive_the_run_that_wrote_them<S: TaskStore + JobQueue>(store: &S) {
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

async fn attempts_run_out<S: TaskStore + JobQueue>(store: &S) {
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

async fn lifetime_ends<S: TaskStore + JobQueue>(store: &S) {
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

const CONFIRM: &str =
    r#"{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object"}}}"#;
const NAME: &str =
    r#"{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"}}}"#;

async fn held_tasks_resume_in_place_while_their_lease_lives<S: TaskStore + JobQueue + EventBus>(store: &S) {
    let record = store.create(new_task("holder", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let mut sub = store.subscribe(&record.id).await.expect("subscribe");
    let round = Some(Some(r#"{"round":2}"#));
    assert_eq!(store.hold(&lease, &asks(&[("confirm", CONFIRM)]), round).await.expect("hold"), Renewal::Held);
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::InputRequired));
    let held = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!((held.status, held.input_requests), (TaskStatus::InputRequired, raw(&[("confirm", CONFIRM)])));
    assert_eq!(store.renew(&lease, LEASE, None).await.expect("renew"), Renewal::Held, "the run keeps its lease");
    let yes = r#"{"action":"accept","content":{"confirm":true}}"#;
    let answered = store.answer(&record.id, "holder", &checked(&[("confirm", yes, FORM)]), MAX_ANSWER_BYTES).await;
    assert_eq!(answered.expect("answer"), Answered::Resumed);
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::Working), "the holder is woken");
    let jobs = store.read("w2", 10, Duration::from_millis(300)).await.expect("read");
    assert!(jobs.iter().all(|j| j.task != record.id), "no second run of a task held in place: {jobs:?}");
    let resumed = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!(resumed.status, TaskStatus::Working);
    assert_eq!(resumed.input_responses, form_answers(&[("confirm", yes)]));
    assert_eq!(resumed.state.as_deref(), Some(r#"{"round":2}"#), "the round's continuation is kept");
    let done = TaskOutcome::Result(r#"{"content":[]}"#.to_owned());
    assert_eq!(store.finish(&lease, &job, TaskStatus::Completed, done, false).await.expect("finish"), Settled::Done);
    // Under a stale lease nothing is held.
    assert_eq!(store.hold(&lease, &asks(&[("k", CONFIRM)]), None).await.expect("hold"), Renewal::Lost);

    // A held run released (its replica shutting down) leaves the task parked: no job until the
    // answer, which then enqueues one; the attempt is given back.
    let record = store.create(new_task("holder", 2)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    assert_eq!(store.hold(&lease, &asks(&[("confirm", CONFIRM)]), None).await.expect("hold"), Renewal::Held);
    assert_eq!(store.release(&lease, &job).await.expect("release"), Settled::Done);
    let jobs = store.read("w2", 10, Duration::from_millis(300)).await.expect("read");
    assert!(jobs.iter().all(|j| j.task != record.id), "no job before the answer: {jobs:?}");
    let answered = store.answer(&record.id, "holder", &checked(&[("confirm", yes, FORM)]), MAX_ANSWER_BYTES).await;
    assert_eq!(answered.expect("answer"), Answered::Resumed);
    let resumed = next_job(store, "w2", &record.id).await;
    let Claim::Run { task, .. } = store.claim(&resumed, "w2", LEASE, 3).await.expect("claim") else {
        panic!("the answer resumes it on any worker")
    };
    assert_eq!(task.attempts, 1, "the released hold gave its attempt back");
}

async fn park_waits_for_input<S: TaskStore + JobQueue + EventBus>(store: &S) {
    let record = store.create(new_task("asker", 1)).await.expect("create").record().expect("a task").clone();
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { lease, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    let mut sub = store.subscribe(&record.id).await.expect("subscribe");
    let requests = asks(&[("confirm", CONFIRM), ("name", NAME)]);
    assert_eq!(store.park(&lease, &job, &requests, Some(r#"{"step":1}"#)).await.expect("park"), Settled::Done);
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::InputRequired));
    // A repeat of the same park (a lost reply) changes nothing.
    assert_eq!(store.park(&lease, &job, &requests, Some(r#"{"step":9}"#)).await.expect("park"), Settled::Done);
    let parked = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!(parked.status, TaskStatus::InputRequired);
    assert_eq!(parked.input_requests, raw(&[("confirm", CONFIRM), ("name", NAME)]), "kept byte for byte");
    let control = store.get(&record.id, Read::Control).await.expect("get").expect("exists");
    assert_eq!(control.input_requests, parked.input_requests, "a control read shows what is asked");
    assert!(control.arguments.is_empty() && control.state.is_none(), "but not the payload");
    assert_eq!(parked.state.as_deref(), Some(r#"{"step":1}"#));
    assert_eq!(store.claim(&job, "w1", LEASE, 3).await.expect("claim"), Claim::Skip(Skip::Parked));

    // Answers: another owner's are refused; unknown keys are ignored; a partial answer
    // leaves the rest outstanding; the last one resumes the task on any worker.
    let yes = r#"{"action":"accept","content":{"confirm":true}}"#;
    assert_eq!(
        store
            .answer(&record.id, "intruder", &checked(&[("confirm", yes, FORM)]), MAX_ANSWER_BYTES)
            .await
            .expect("answer"),
        Answered::NotFound
    );
    // An answer of the wrong kind for an outstanding key is refused, and nothing recorded.
    let roots = r#"{"roots":[{"uri":"file:///tmp"}]}"#;
    let wrong = checked(&[
        ("confirm", roots, &["roots/list"]),
        ("name", r#"{"action":"accept","content":{"name":"x"}}"#, FORM),
    ]);
    assert_eq!(
        store.answer(&record.id, "asker", &wrong, MAX_ANSWER_BYTES).await.expect("answer"),
        Answered::Invalid("confirm".to_owned())
    );
    // Answers past the task's byte budget are refused, and nothing recorded.
    let both = checked(&[("confirm", yes, FORM), ("name", yes, FORM)]);
    let budget = u64::try_from(yes.len()).expect("small");
    assert_eq!(store.answer(&record.id, "asker", &both, budget).await.expect("answer"), Answered::TooLarge(budget));
    let first = checked(&[("confirm", yes, FORM), ("unknown", r#"{"x":1}"#, &[])]);
    assert_eq!(
        store.answer(&record.id, "asker", &first, MAX_ANSWER_BYTES).await.expect("answer"),
        Answered::Waiting(1)
    );
    let partial = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!(partial.status, TaskStatus::InputRequired);
    assert_eq!(partial.input_requests, raw(&[("name", NAME)]));
    assert_eq!(partial.input_responses, form_answers(&[("confirm", yes)]), "unknown keys are not recorded");
    // An answer to a key no longer outstanding changes nothing.
    let again = checked(&[("confirm", r#"{"action":"decline"}"#, FORM)]);
    assert_eq!(
        store.answer(&record.id, "asker", &again, MAX_ANSWER_BYTES).await.expect("answer"),
        Answered::Waiting(1)
    );
    // Stored verbatim: no re-encoding of big numbers, empty arrays or escapes.
    let alice = r#"{"action":"accept","content":{"name":"Ålice \"A\"","n":12345678901234567890,"tags":[]}}"#;
    // The budget counts every round: the first answer's bytes are already spent.
    let tight = u64::try_from(yes.len() + alice.len() - 1).expect("small");
    let last = checked(&[("name", alice, FORM)]);
    assert_eq!(store.answer(&record.id, "asker", &last, tight).await.expect("answer"), Answered::TooLarge(tight));
    assert_eq!(store.answer(&record.id, "asker", &last, MAX_ANSWER_BYTES).await.expect("answer"), Answered::Resumed);
    assert_eq!(event::<S>(&mut sub).await, TaskEvent::Status(TaskStatus::Working));
    let resumed = next_job(store, "w2", &record.id).await;
    let Claim::Run { task, .. } = store.claim(&resumed, "w2", LEASE, 3).await.expect("claim") else {
        panic!("a resumed task runs")
    };
    assert_eq!(task.status, TaskStatus::Working);
    assert!(task.input_requests.is_empty());
    assert_eq!(
        task.input_responses,
        form_answers(&[("confirm", yes), ("name", alice)]),
        "every round's answers, verbatim, with the method each answers"
    );
    assert_eq!(task.state.as_deref(), Some(r#"{"step":1}"#));
    assert_eq!(task.attempts, 1, "a run that parked ended cleanly: its attempt was given back");
    assert_eq!(
        store.answer(&record.id, "asker", &last, MAX_ANSWER_BYTES).await.expect("answer"),
        Answered::NotWaiting(TaskStatus::Working)
    );
}

async fn answers_gathered_before_creation_reach_the_first_run<S: TaskStore + JobQueue>(store: &S) {
    let mut task = new_task("preflight", 1);
    let alice = r#"{"action":"accept","content":{"name":"Alice"}}"#;
    task.input_responses = form_answers(&[("user_name", alice)]);
    task.state = Some(r#"{"asked":1}"#.to_owned());
    // A task of a virtual server: its name sits beside the answers in the creation.
    task.server = Some("ops".to_owned());
    let record = store.create(task).await.expect("create").record().expect("a task").clone();
    assert_eq!(record.input_responses, form_answers(&[("user_name", alice)]));
    let job = next_job(store, "w1", &record.id).await;
    let Claim::Run { task, .. } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    assert_eq!(task.input_responses, form_answers(&[("user_name", alice)]));
    assert_eq!(task.state.as_deref(), Some(r#"{"asked":1}"#));
    assert_eq!(task.server.as_deref(), Some("ops"));
}

async fn marks_are_single_use<S: OnceMarks>(store: &S) {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis();
    let until = u64::try_from(now).expect("ms") + 60_000;
    assert!(store.first_use("nonce-a", until).await.expect("mark"));
    assert!(!store.first_use("nonce-a", until).await.expect("mark"), "a replay is refused");
    assert!(store.first_use("nonce-b", until).await.expect("mark"), "marks are per id");
}

async fn released_tasks_run_again_at_once<S: TaskStore + JobQueue>(store: &S) {
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

async fn renewed_jobs_are_not_reclaimed<S: TaskStore + JobQueue>(store: &S) {
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

async fn reclaim_reaches_every_pending_job<S: TaskStore + JobQueue>(store: &S) {
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

async fn published_changes_reach_every_listener<S: EventBus>(store: &S) {
    let mut a = store.changes();
    let mut b = store.changes();
    // The Redis subscriber may still be connecting: publish until the first change arrives.
    // Each look waits up to 200 ms for the change itself.
    let first = wait_every("a published change to be delivered", WAIT, Duration::ZERO, async || {
        store.publish_change(&crate::Change::ToolsListChanged).await.expect("publish");
        match tokio::time::timeout(Duration::from_millis(200), a.recv()).await {
            Ok(Ok(crate::Change::Missed)) => Look::NotYet("a missed change".to_owned()),
            Err(_) => Look::NotYet("nothing within 200 ms".to_owned()),
            Ok(other) => Look::Done(other.expect("a change")),
        }
    })
    .await;
    assert_eq!(first, crate::Change::ToolsListChanged);
    let uri = crate::Change::ResourceUpdated("test://watched".to_owned());
    store.publish_change(&uri).await.expect("publish");
    let seen = async |rx: &mut tokio::sync::broadcast::Receiver<crate::Change>| loop {
        let change = tokio::time::timeout(WAIT, rx.recv()).await.expect("a change in time").expect("not closed");
        if let crate::Change::ResourceUpdated(u) = change {
            break u;
        }
    };
    assert_eq!(seen(&mut a).await, "test://watched");
    assert_eq!(seen(&mut b).await, "test://watched", "every listener gets every change");
}

async fn published_events_reach_subscribers<S: EventBus>(store: &S) {
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
