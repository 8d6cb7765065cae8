//! `store.replicas_ack` against a real primary and its real replica: a relied-on write is
//! answered once the replica holds it (one round trip: the script, the marker, `WAIT`), a
//! write the frozen replica cannot confirm fails as `NotAcknowledged` and its retry (same
//! idempotency key, same lease) succeeds once it can, and with 0 nothing waits.
//!
//! Nothing here depends on the machine's speed: a write the test expects confirmed may wait
//! long ([`CONFIRMED_WITHIN`]); only writes made while the replica is frozen (SIGSTOP), which
//! nothing can confirm, wait briefly ([`REFUSED_AFTER`]); a retry after the replica is thawed
//! waits until the replica has caught up by its own replication offset; and what must happen
//! first (a try refused, a write blocked in `WAIT`) is seen happening, not slept for.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::wait::{Look, wait_every, wait_for};
use mcpgate_store::testing::{RedisReplicated, RedisServer};
use mcpgate_store::{
    Claim, Created, Idempotency, JobQueue as _, NewTask, Read, RedisOptions, RedisStore, Settled, StoreError,
    TaskOutcome, TaskStore as _,
};

use crate::redis::{Monitor, new_task, options, warm_up_the_reader};

/// How long a write the test expects confirmed may wait for the replica: liveness, not speed
/// (a busy machine must not turn a confirmation into a refusal).
const CONFIRMED_WITHIN: Duration = Duration::from_secs(10);

/// How long a write made while the replica is frozen waits: a frozen replica confirms nothing
/// however long it is given, so this only keeps the test short.
const REFUSED_AFTER: Duration = Duration::from_millis(300);

/// How long a thawed replica may take to apply what it missed.
const CATCH_UP: Duration = Duration::from_secs(30);

/// A store waiting for `replicas` (patiently: [`CONFIRMED_WITHIN`]).
fn acked(server: &RedisServer, replicas: u32) -> RedisOptions {
    RedisOptions {
        replicas_ack: replicas,
        replicas_ack_timeout: CONFIRMED_WITHIN,
        command_timeout: CONFIRMED_WITHIN + Duration::from_secs(5),
        ..options(server)
    }
}

/// The same store (same prefix) waiting only [`REFUSED_AFTER`]: for the writes made while the
/// replica is frozen, which must be refused.
fn impatient(opts: &RedisOptions) -> RedisOptions {
    RedisOptions { replicas_ack_timeout: REFUSED_AFTER, ..opts.clone() }
}

/// A task with an idempotency key held for a minute (a retry must find it).
pub(crate) fn keyed(owner: &str, scope: u8) -> NewTask {
    NewTask {
        idempotency: Some(Idempotency { scope: [scope; 32], call: [0; 32], window_ms: 60_000 }),
        ..new_task(owner, [scope; 32])
    }
}

/// Thaws the replica however the test ends (a frozen redis-server outlives nothing, but a
/// panic must not leave it stopped while the next assertion runs).
pub(crate) struct Thaw<'a>(pub(crate) &'a RedisServer);

impl Drop for Thaw<'_> {
    fn drop(&mut self) {
        self.0.resume();
    }
}

/// A field of a task record as the replica has it (read directly from the replica).
async fn on_replica(replica: &RedisServer, key: &str, field: &str) -> Option<String> {
    let mut conn =
        redis::Client::open(replica.url()).expect("url").get_multiplexed_async_connection().await.expect("c");
    redis::cmd("HGET").arg(key).arg(field).query_async(&mut conn).await.expect("hget")
}

/// The task record's key (as `keys.rs` lays it out).
fn task_key(opts: &RedisOptions, record: &mcpgate_store::TaskRecord) -> String {
    let p = &opts.prefix;
    format!("{p}:{{{p}:{:02x}}}:task:{}", record.id.shard(), record.id)
}

#[tokio::test]
async fn a_relied_on_write_is_answered_once_the_replica_holds_it() {
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    warm_up_the_reader(&store).await;
    let mut monitor = Monitor::start(set.primary().port()).await;
    let mut sent = async |what: &str| {
        let seen: Vec<String> = monitor
            .commands_since_last()
            .await
            .iter()
            .map(|line| line.split('"').nth(1).unwrap_or_default().to_ascii_uppercase())
            .collect();
        (what.to_owned(), seen)
    };
    let waited = |what: &str| (what.to_owned(), vec!["EVALSHA".to_owned(), "SET".to_owned(), "WAIT".to_owned()]);

    let record = store.create(keyed("ack", 1)).await.expect("create").record().expect("a task").clone();
    assert_eq!(sent("create").await, waited("create"));
    // WAIT answered 1: the replica holds the task now, not eventually.
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &record), "status").await.as_deref(), Some("working"));

    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    assert_eq!(sent("read").await.1.len(), 1, "a read waits for nothing");
    let Claim::Run { lease, .. } = store.claim(&jobs[0], "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    assert_eq!(sent("claim").await, waited("claim"));
    store.renew(&lease, Duration::from_secs(30), None).await.expect("renew");
    assert_eq!(sent("renew").await, ("renew".to_owned(), vec!["EVALSHA".to_owned()]), "renewals wait for nothing");
    let done = TaskOutcome::Result("{}".to_owned());
    assert_eq!(
        store.finish(&lease, &jobs[0], TaskStatus::Completed, done, false).await.expect("finish"),
        Settled::Done
    );
    assert_eq!(sent("finish").await, waited("finish"));
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &record), "status").await.as_deref(), Some("completed"));

    // Redis lost its scripts (a restart, a promoted replica): the pipeline's NOSCRIPT loads
    // the script and sends the write and its WAIT again.
    let mut conn =
        redis::Client::open(set.primary().url()).expect("url").get_multiplexed_async_connection().await.expect("c");
    redis::cmd("SCRIPT").arg("FLUSH").query_async::<()>(&mut conn).await.expect("script flush");
    let again = store.create(keyed("ack", 9)).await.expect("create after SCRIPT FLUSH");
    let Created::New(again) = again else { panic!("a new task: {again:?}") };
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &again), "status").await.as_deref(), Some("working"));
}

#[tokio::test]
async fn a_write_the_replica_cannot_confirm_fails_and_its_retry_gets_the_same_task() {
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    let hasty = RedisStore::connect(impatient(&opts)).await.expect("connects");

    set.replica().pause();
    let thaw = Thaw(set.replica());
    let refused = hasty.create(keyed("frozen", 2)).await;
    assert_eq!(refused.err(), Some(StoreError::NotAcknowledged { wanted: 1, got: 0 }));
    drop(thaw);
    set.wait_until_caught_up(CATCH_UP);

    // The client retries with the same key: the task the first try created, acknowledged now.
    let retried = store.create(keyed("frozen", 2)).await.expect("retry");
    let Created::Existing(record) = retried else { panic!("the retry gets the first try's task: {retried:?}") };
    let page = store.list("frozen", None, 10).await.expect("list");
    assert_eq!(page.tasks.iter().map(|t| &t.id).collect::<Vec<_>>(), vec![&record.id], "one task, not two");
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &record), "id").await, Some(record.id.to_string()));

    // A result the replica cannot confirm: not a success; the worker's retry with the same
    // lease finds it recorded and is confirmed once the replica answers.
    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    let job = jobs.iter().find(|j| j.task == record.id).expect("the task's job");
    let Claim::Run { lease, .. } = store.claim(job, "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    let done = TaskOutcome::Result("{}".to_owned());
    set.replica().pause();
    let thaw = Thaw(set.replica());
    let unconfirmed = hasty.finish(&lease, job, TaskStatus::Completed, done.clone(), false).await;
    assert_eq!(unconfirmed, Err(StoreError::NotAcknowledged { wanted: 1, got: 0 }));
    drop(thaw);
    set.wait_until_caught_up(CATCH_UP);
    // The repeat finds the outcome recorded (its status terminal, as settle.lua answers a
    // repeat), and the marker's write makes the replica's confirmation cover it.
    let repeat = store.finish(&lease, job, TaskStatus::Completed, done, false).await.expect("retry");
    assert_eq!(repeat, Settled::AlreadyTerminal);
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &record), "status").await.as_deref(), Some("completed"));
}

#[tokio::test]
async fn with_no_replicas_asked_nothing_waits() {
    let set = RedisReplicated::start();
    let store = RedisStore::connect(acked(set.primary(), 0)).await.expect("connects");
    let mut monitor = Monitor::start(set.primary().port()).await;
    set.replica().pause();
    let _thaw = Thaw(set.replica());
    // The frozen replica confirms nothing, and nothing asks it to.
    let created = store.create(keyed("nowait", 3)).await.expect("create without waiting");
    assert!(matches!(created, Created::New(_)), "{created:?}");
    let seen = monitor.commands_since_last().await;
    assert_eq!(seen.len(), 1, "only the script: {seen:#?}");
    assert!(seen[0].to_ascii_uppercase().contains("EVALSHA"), "{seen:#?}");
}

#[tokio::test]
async fn a_claim_the_replica_confirms_late_spends_one_attempt() {
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    let hasty = RedisStore::connect(impatient(&opts)).await.expect("connects");
    let created = store.create(keyed("late", 3)).await.expect("create");
    let record = created.record().expect("a task").clone();
    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    let job = jobs.iter().find(|j| j.task == record.id).expect("the task's job").clone();
    let key = task_key(&opts, &record);
    let mut monitor = Monitor::start(set.primary().port()).await;

    // The replica is frozen while the claim is sent: its first try lands on the primary but is
    // not confirmed. Thawed once the claim has been seen trying again (so the first try was
    // refused, whatever the machine's speed), a retry under the same claim id is confirmed and
    // holds the lease: the task's first attempt, not a second one (a fresh claim would find
    // the first try's live lease and be refused as busy). The lease is long: the claim retries
    // for a third of it.
    set.replica().pause();
    let thaw = Thaw(set.replica());
    let claim = tokio::spawn({
        let store = hasty.clone();
        async move { store.claim(&job, "w", Duration::from_secs(60), 3).await }
    });
    let mut tries = 0;
    wait_for("the claim to be sent again (retried)", Duration::from_secs(20), async || {
        let sent = monitor.commands_since_last().await;
        tries += sent.iter().filter(|c| c.to_ascii_uppercase().contains("\"EVALSHA\"") && c.contains(&key)).count();
        if tries >= 2 { Look::Done(()) } else { Look::NotYet(format!("sent {tries} times")) }
    })
    .await;
    assert!(!claim.is_finished(), "the claim was answered while its replica was frozen");
    drop(thaw);
    let claimed = tokio::time::timeout(Duration::from_secs(30), claim).await.expect("bounded").expect("joined");
    let Ok(Claim::Run { task, .. }) = claimed else { panic!("the retried claim runs the task: {claimed:?}") };
    assert_eq!(task.attempts, 1, "the unconfirmed first try spent no attempt");
    assert_eq!(on_replica(set.replica(), &task_key(&opts, &record), "attempts").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn an_unconfirmed_task_to_run_here_is_handed_back_unspent() {
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    let hasty = RedisStore::connect(impatient(&opts)).await.expect("connects");
    set.replica().pause();
    let thaw = Thaw(set.replica());
    let refused = hasty.create_running(keyed("here", 4), "w-here", Duration::from_secs(30)).await;
    assert_eq!(refused.err(), Some(StoreError::NotAcknowledged { wanted: 1, got: 0 }));
    drop(thaw);
    set.wait_until_caught_up(CATCH_UP);

    // The client's retry finds the task; it is not left under the creator's unused lease (30 s)
    // but handed back in the background (well before that lease would lapse), and its claim is
    // its first attempt.
    let retried = store.create(keyed("here", 4)).await.expect("retry");
    let Created::Existing(record) = retried else { panic!("the first try's task: {retried:?}") };
    // Each read blocks up to 200 ms itself.
    let job =
        wait_every("the unconfirmed task to be handed back", Duration::from_secs(20), Duration::ZERO, async || {
            let jobs = store.read("w", 10, Duration::from_millis(200)).await.expect("read");
            jobs.iter().find(|j| j.task == record.id).cloned().map_or_else(|| Look::not_yet(jobs), Look::Done)
        })
        .await;
    let claimed = store.claim(&job, "w", Duration::from_secs(30), 3).await.expect("claim");
    let Claim::Run { task, .. } = claimed else { panic!("runs: {claimed:?}") };
    assert_eq!(task.attempts, 1, "the creator's unconfirmed lease spent no attempt");
}

/// Whether a client of `server` is blocked in `WAIT` now (`CLIENT LIST`: flag `b`, last
/// command `wait`).
async fn blocked_in_wait(server: &RedisServer) -> bool {
    let mut conn = redis::Client::open(server.url()).expect("url").get_multiplexed_async_connection().await.expect("c");
    let clients: String = redis::cmd("CLIENT").arg("LIST").query_async(&mut conn).await.expect("client list");
    clients.lines().any(|client| {
        let field = |name: &str| client.split(' ').find_map(|f| f.strip_prefix(name)).unwrap_or_default();
        field("cmd=") == "wait" && field("flags=").contains('b')
    })
}

#[tokio::test]
async fn a_waiting_write_does_not_hold_up_other_calls() {
    let set = RedisReplicated::start();
    // One shared connection: without a lane of their own, every call would queue behind the
    // WAIT on it. The acknowledgement timeout is long, so "still waiting" is unambiguous.
    let opts = RedisOptions { pool_size: 1, ..acked(set.primary(), 1) };
    let store = RedisStore::connect(opts).await.expect("connects");
    let other = store.create(keyed("lane", 5)).await.expect("create").record().expect("a task").clone();

    set.replica().pause();
    let thaw = Thaw(set.replica());
    let waiting = tokio::spawn({
        let store = store.clone();
        async move { store.create(keyed("lane", 6)).await }
    });
    wait_for("the create's WAIT to block on the primary", Duration::from_secs(5), async || {
        blocked_in_wait(set.primary()).await
    })
    .await;
    let read = store.get(&other.id, Read::Control).await.expect("get").expect("found");
    assert_eq!(read.id, other.id);
    assert!(blocked_in_wait(set.primary()).await, "the get was answered only once the create's WAIT had returned");

    // Thawed, the replica confirms the create that waited.
    drop(thaw);
    let created = tokio::time::timeout(CONFIRMED_WITHIN + Duration::from_secs(5), waiting)
        .await
        .expect("the create ends")
        .expect("joined");
    assert!(matches!(created, Ok(Created::New(_))), "{created:?}");
}

#[tokio::test]
async fn a_hold_repeated_after_its_answer_asks_nothing_again() {
    use mcpgate_store::{Answered, CheckedAnswer, RawAnswer, Renewal};
    let set = RedisReplicated::start();
    let opts = acked(set.primary(), 1);
    let store = RedisStore::connect(opts.clone()).await.expect("connects");
    let hasty = RedisStore::connect(impatient(&opts)).await.expect("connects");
    let record = store.create(keyed("asker", 7)).await.expect("create").record().expect("a task").clone();
    let jobs = store.read("w", 10, Duration::from_millis(100)).await.expect("read");
    let job = jobs.iter().find(|j| j.task == record.id).expect("the task's job");
    let Claim::Run { lease, .. } = store.claim(job, "w", Duration::from_secs(30), 3).await.expect("claim") else {
        panic!("runs")
    };
    let confirm = r#"{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object"}}}"#;
    let requests =
        [("confirm".to_owned(), RawAnswer { method: "elicitation/create".to_owned(), json: confirm.to_owned() })]
            .into_iter()
            .collect();

    // The hold lands on the primary, unconfirmed; the client sees the request and answers it,
    // which resumes the task in place under the same lease.
    set.replica().pause();
    let thaw = Thaw(set.replica());
    let unconfirmed = hasty.hold(&lease, &requests, None).await;
    assert_eq!(unconfirmed, Err(StoreError::NotAcknowledged { wanted: 1, got: 0 }));
    drop(thaw);
    set.wait_until_caught_up(CATCH_UP);
    let yes = r#"{"action":"accept","content":{"confirm":true}}"#;
    let answers = [("confirm".to_owned(), CheckedAnswer { fits: vec!["elicitation/create"], json: yes.to_owned() })]
        .into_iter()
        .collect();
    assert_eq!(store.answer(&record.id, &record.owner, &answers, 1 << 20).await.expect("answer"), Answered::Resumed);

    // The run's repeat of the hold must not ask the answered key again: it holds nothing and
    // says so, and the record keeps the task working with its answer for the run to read.
    assert_eq!(store.hold(&lease, &requests, None).await.expect("repeat"), Renewal::Lost);
    let after = store.get(&record.id, Read::Full).await.expect("get").expect("exists");
    assert_eq!(after.status, TaskStatus::Working);
    assert!(after.input_requests.is_empty(), "asked again: {:?}", after.input_requests);
    assert_eq!(after.input_responses.get("confirm").map(|a| a.json.as_str()), Some(yes));
}
