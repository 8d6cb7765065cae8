//! Payloads sealed at rest: what a Redis dump of a task's life holds, what reads give back,
//! and that sealed values open only where they were sealed.

use std::time::Duration;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::RedisServer;
use mcpgate_store::testing::wait::{Look, wait_every};
use mcpgate_store::{
    Answered, CheckedAnswer, CheckedAnswers, Claim, Created, JobQueue as _, NewTask, RawAnswer, RawAnswers, Read,
    RedisStore, Settled, StoreError, TaskOutcome, TaskStore as _,
};

use crate::redis::{at_rest, options};

const LEASE: Duration = Duration::from_secs(30);

fn task(arguments: &str, answers: &[(&str, &str)]) -> NewTask {
    NewTask {
        owner: "alice".to_owned(),
        issuer: String::new(),
        subject: "alice".to_owned(),
        era: Era::Modern,
        tool: "visible_tool_name".to_owned(),
        arguments: arguments.to_owned(),
        capabilities: "{}".to_owned(),
        ttl_ms: Some(60_000),
        poll_interval_ms: 100,
        scopes: Vec::new(),
        idempotency: None,
        index_horizon_ms: None,
        indexed: false,
        quota: None,
        input_responses: answers
            .iter()
            .map(|(k, v)| {
                ((*k).to_owned(), RawAnswer { method: "elicitation/create".to_owned(), json: (*v).to_owned() })
            })
            .collect::<RawAnswers>(),
        state: Some("\"secret-state-one\"".to_owned()),
        credential: Some("secret-credential".to_owned()),
        trace: Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01".to_owned()),
        server: None,
    }
}

/// Runs the next job of `store` to its lease; the record the claim handed out.
async fn claim_next(store: &RedisStore) -> (mcpgate_store::Lease, mcpgate_store::Job, mcpgate_store::TaskRecord) {
    let jobs = store.read("w1", 10, Duration::from_millis(500)).await.expect("read");
    let job = jobs.into_iter().next().expect("a job");
    let Claim::Run { lease, task } = store.claim(&job, "w1", LEASE, 3).await.expect("claim") else { panic!("runs") };
    (lease, job, *task)
}

/// Everything Redis holds, as written by `SAVE` without compression.
async fn dump(server: &RedisServer) -> String {
    let client = redis::Client::open(server.url()).expect("client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    // SAVE writes and syncs a file: on a busy machine that can outlast the client's default
    // 500 ms response timeout. Bound it generously instead (liveness, not speed).
    conn.set_response_timeout(Duration::from_secs(30));
    let _: () =
        redis::cmd("CONFIG").arg("SET").arg("rdbcompression").arg("no").query_async(&mut conn).await.expect("set");
    let _: () = redis::cmd("SAVE").query_async(&mut conn).await.expect("save");
    let dir: Vec<String> = redis::cmd("CONFIG").arg("GET").arg("dir").query_async(&mut conn).await.expect("dir");
    let file: Vec<String> =
        redis::cmd("CONFIG").arg("GET").arg("dbfilename").query_async(&mut conn).await.expect("file");
    let bytes = std::fs::read(std::path::Path::new(&dir[1]).join(&file[1])).expect("dump file");
    String::from_utf8_lossy(&bytes).into_owned()
}

#[tokio::test]
async fn a_dump_of_a_whole_task_life_holds_no_payload_in_plain_text() {
    let server = RedisServer::start();
    let store = RedisStore::connect(options(&server)).await.expect("connects");
    let Created::New(created) = store
        .create(task(r#"{"secret":"secret-argument"}"#, &[("early", r#"{"action":"secret-answer-early"}"#)]))
        .await
        .expect("create")
    else {
        panic!("a new task")
    };

    // The first run asks for input and parks with a new state.
    let (lease, job, record) = claim_next(&store).await;
    assert_eq!(record.arguments, r#"{"secret":"secret-argument"}"#, "the run reads its arguments in plain");
    assert_eq!(record.credential.as_deref(), Some("secret-credential"), "and acts with the caller's credential");
    assert_eq!(record.trace.as_deref(), Some("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"));
    assert_eq!(record.state.as_deref(), Some("\"secret-state-one\""));
    assert_eq!(record.input_responses["early"].json, r#"{"action":"secret-answer-early"}"#);
    let asked = [(
        "confirm".to_owned(),
        RawAnswer { method: "elicitation/create".to_owned(), json: r#"{"message":"visible-question"}"#.to_owned() },
    )]
    .into_iter()
    .collect();
    assert_eq!(store.park(&lease, &job, &asked, Some("\"secret-state-two\"")).await.expect("park"), Settled::Done);

    // The answer's budget counts the answer itself, not its sealed form (longer).
    let answer = r#"{"action":"accept","content":{"pin":"secret-answer-late"}}"#;
    let answers: CheckedAnswers =
        [("confirm".to_owned(), CheckedAnswer { fits: vec!["elicitation/create"], json: answer.to_owned() })]
            .into_iter()
            .collect();
    let budget = (answer.len() + r#"{"action":"secret-answer-early"}"#.len()) as u64;
    assert_eq!(store.answer(&created.id, "alice", &answers, budget).await.expect("answer"), Answered::Resumed);

    // The second run gets every answer and the state in plain, and completes.
    let (lease, job, record) = claim_next(&store).await;
    assert_eq!(record.state.as_deref(), Some("\"secret-state-two\""));
    assert_eq!(record.input_responses["confirm"].json, answer);
    let result = TaskOutcome::Result(r#"{"content":[{"type":"text","text":"secret-result"}]}"#.to_owned());
    assert_eq!(
        store.finish(&lease, &job, TaskStatus::Completed, result.clone(), false).await.expect("finish"),
        Settled::Done
    );

    let dump = dump(&server).await;
    for secret in [
        "secret-argument",
        "secret-answer-early",
        "secret-answer-late",
        "secret-state",
        "secret-result",
        "secret-credential",
    ] {
        assert!(!dump.contains(secret), "{secret} is in the dump");
    }
    // The dump is readable (uncompressed): what stays in plain is there.
    // (The question is gone: an answered request is dropped from the record.)
    for visible in ["visible_tool_name", "completed", created.id.as_str()] {
        assert!(dump.contains(visible), "{visible} is not in the dump");
    }

    let read = store.get(&created.id, Read::Full).await.expect("get").expect("found");
    assert_eq!(read.arguments, r#"{"secret":"secret-argument"}"#);
    assert_eq!(read.outcome, Some(result.clone()));
    let read = store.get(&created.id, Read::WithOutcome).await.expect("get").expect("found");
    assert_eq!(read.outcome, Some(result));
}

#[tokio::test]
async fn plain_records_from_before_the_cutover_still_read_and_sealed_ones_read_after_sealing_is_turned_off() {
    let server = RedisServer::start();
    let mut plain = options(&server);
    plain.at_rest = Some(at_rest(false));
    let mut sealed = plain.clone();
    sealed.at_rest = Some(at_rest(true));
    let writes_plain = RedisStore::connect(plain).await.expect("connects");
    let Created::New(a) = writes_plain.create(task(r#"{"n":"plain-argument"}"#, &[])).await.expect("create") else {
        panic!("new")
    };
    assert!(dump(&server).await.contains("plain-argument"), "written in plain when sealing is off");
    // Sealing is turned on after the plain task was created (the cutover is the first start
    // with it on, the window here being zero).
    until_past(&mut raw(&server).await, a.created_ms).await;
    let writes_sealed = RedisStore::connect(sealed).await.expect("connects");
    let Created::New(b) = writes_sealed.create(task(r#"{"n":"sealed-argument"}"#, &[])).await.expect("create") else {
        panic!("new")
    };
    for store in [&writes_plain, &writes_sealed] {
        let a = store.get(&a.id, Read::Full).await.expect("get").expect("found");
        assert_eq!(a.arguments, r#"{"n":"plain-argument"}"#);
        let b = store.get(&b.id, Read::Full).await.expect("get").expect("found");
        assert_eq!(b.arguments, r#"{"n":"sealed-argument"}"#);
    }
}

#[tokio::test]
async fn a_sealed_value_moved_to_another_task_does_not_open() {
    let server = RedisServer::start();
    let opts = options(&server);
    let prefix = opts.prefix.clone();
    let store = RedisStore::connect(opts).await.expect("connects");
    let Created::New(a) = store.create(task(r#"{"n":1}"#, &[])).await.expect("create") else { panic!("new") };
    let Created::New(b) = store.create(task(r#"{"n":2}"#, &[])).await.expect("create") else { panic!("new") };

    // Someone with write access to Redis copies a's sealed arguments into b.
    let client = redis::Client::open(server.url()).expect("client");
    let mut conn = client.get_multiplexed_async_connection().await.expect("connect");
    let keys: Vec<String> = redis::cmd("KEYS").arg(format!("{prefix}*")).query_async(&mut conn).await.expect("keys");
    let key_of = |id: &str| keys.iter().find(|k| k.ends_with(id)).cloned().expect("the task's key");
    let args: String =
        redis::cmd("HGET").arg(key_of(a.id.as_str())).arg("args").query_async(&mut conn).await.expect("hget");
    assert!(args.starts_with('\u{2}'), "stored sealed");
    let _: () = redis::cmd("HSET")
        .arg(key_of(b.id.as_str()))
        .arg("args")
        .arg(&args)
        .query_async(&mut conn)
        .await
        .expect("hset");

    let refused = store.get(&b.id, Read::Full).await.expect_err("does not open");
    assert!(matches!(refused, StoreError::Sealing { ref field, .. } if field == "args"), "{refused:?}");
    assert!(!refused.to_string().contains("\"n\""), "the error shows nothing of the value: {refused}");
    // Reads that do not fetch the payload are unaffected.
    assert_eq!(store.get(&b.id, Read::Control).await.expect("get").expect("found").status, TaskStatus::Working);
}

/// A connection of someone with write access to Redis, outside the store.
async fn raw(server: &RedisServer) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(server.url()).expect("client");
    client.get_multiplexed_async_connection().await.expect("connect")
}

/// The key of task `id`'s record under `prefix`.
async fn task_key(conn: &mut redis::aio::MultiplexedConnection, prefix: &str, id: &str) -> String {
    let keys: Vec<String> =
        redis::cmd("KEYS").arg(format!("{prefix}*:task:{id}")).query_async(conn).await.expect("keys");
    keys.into_iter().next().expect("the task's key")
}

async fn hset(conn: &mut redis::aio::MultiplexedConnection, key: &str, field: &str, value: &str) {
    let _: () = redis::cmd("HSET").arg(key).arg(field).arg(value).query_async(conn).await.expect("hset");
}

/// Records the encryption-at-rest cutover of the store under `prefix` as `at_ms` (store
/// clock), as the first replica started with sealing on would have.
async fn set_cutover(conn: &mut redis::aio::MultiplexedConnection, prefix: &str, at_ms: u64) {
    let _: () =
        redis::cmd("SET").arg(format!("{prefix}:at-rest:cutover")).arg(at_ms).query_async(conn).await.expect("set");
}

/// Redis's clock, in Unix ms.
async fn redis_now(conn: &mut redis::aio::MultiplexedConnection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await.expect("time");
    secs * 1000 + micros / 1000
}

/// Waits (bounded) until Redis's clock is past `ms`.
async fn until_past(conn: &mut redis::aio::MultiplexedConnection, ms: u64) {
    wait_every(
        format_args!("Redis's clock to pass {ms}"),
        Duration::from_secs(1),
        Duration::from_millis(2),
        async || {
            let now = redis_now(conn).await;
            if now > ms { Look::Done(()) } else { Look::NotYet(format!("{now}")) }
        },
    )
    .await;
}

/// `value` sealed as the releases before the owner binding did (marker `\x01`, bound to the
/// task id and the field only), with the tests' key.
fn sealed_the_old_way(id: &str, field: &str, value: &str) -> String {
    let ring = mcpgate_seal::KeyRing::parse(&["k1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]).expect("key");
    let sealer = mcpgate_seal::Sealer::new(ring, usize::MAX);
    let binding = mcpgate_seal::Binding {
        purpose: mcpgate_seal::Purpose::AtRest,
        principal: id,
        method: field,
        context: &[0; 32],
    };
    format!("\u{1}{}", sealer.seal(&binding, u64::MAX, value.as_bytes()).expect("seal"))
}

/// A task of `store` run to completion with `result`.
async fn completed(store: &RedisStore, result: &str) -> mcpgate_store::TaskId {
    let Created::New(created) = store.create(task("{}", &[])).await.expect("create") else { panic!("new") };
    let (lease, job, _) = claim_next(store).await;
    let outcome = TaskOutcome::Result(result.to_owned());
    assert_eq!(store.finish(&lease, &job, TaskStatus::Completed, outcome, false).await.expect("finish"), Settled::Done);
    created.id
}

fn refused(read: Result<Option<mcpgate_store::TaskRecord>, StoreError>, field: &str, what: &str) {
    match read {
        Err(StoreError::Sealing { field: f, .. }) if f == field => {}
        other => panic!("{what}: expected the {field} field to be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn a_plain_value_planted_in_a_task_created_after_the_cutover_is_refused() {
    let server = RedisServer::start();
    let opts = options(&server);
    let prefix = opts.prefix.clone();
    let mut conn = raw(&server).await;
    // Every task of this test is created after the cutover.
    set_cutover(&mut conn, &prefix, 1).await;
    let store = RedisStore::connect(opts).await.expect("connects");

    let id = completed(&store, r#"{"content":[{"type":"text","text":"the real result"}]}"#).await;
    let key = task_key(&mut conn, &prefix, id.as_str()).await;
    // Someone with write access to Redis replaces the sealed result with a plain one.
    hset(&mut conn, &key, "result", r#"{"content":[{"type":"text","text":"planted"}]}"#).await;
    for read in [Read::WithOutcome, Read::Full] {
        let got = store.get(&id, read).await;
        assert!(!format!("{got:?}").contains("planted"), "the planted value is not served: {got:?}");
        refused(got, "result", "a planted plain result");
    }
    // The same for a planted error, and for planted arguments of a task yet to run.
    let _: () = redis::cmd("HDEL").arg(&key).arg("result").query_async(&mut conn).await.expect("hdel");
    hset(&mut conn, &key, "error", r#"{"code":-32603,"message":"planted"}"#).await;
    refused(store.get(&id, Read::WithOutcome).await, "error", "a planted plain error");
    let Created::New(waiting) = store.create(task(r#"{"n":1}"#, &[])).await.expect("create") else { panic!("new") };
    let key = task_key(&mut conn, &prefix, waiting.id.as_str()).await;
    hset(&mut conn, &key, "args", r#"{"n":"planted"}"#).await;
    refused(store.get(&waiting.id, Read::Full).await, "args", "planted plain arguments");
}

#[tokio::test]
async fn a_sealed_result_does_not_open_once_its_owner_era_tool_or_error_flag_is_rewritten() {
    let server = RedisServer::start();
    let opts = options(&server);
    let prefix = opts.prefix.clone();
    let mut conn = raw(&server).await;
    set_cutover(&mut conn, &prefix, 1).await;
    let store = RedisStore::connect(opts).await.expect("connects");
    // What a read from Redis opens is tested here: a finished record kept from before the
    // rewrite would be served instead (the true one, as read before the rewrite).
    store.set_terminal_cache(mcpgate_store::TerminalCacheLimits { entries: 0, ..Default::default() });
    let id = completed(&store, r#"{"content":[{"type":"text","text":"alice's result"}]}"#).await;
    let key = task_key(&mut conn, &prefix, id.as_str()).await;

    let read = store.get(&id, Read::WithOutcome).await.expect("get").expect("found");
    let (owner, era, tool) = (read.owner.clone(), "modern", read.tool.clone());
    assert_eq!(owner, "alice");
    for (field, rewritten, original) in [
        // Mallory's tasks/get would find the task as hers and render alice's result.
        ("owner", "mallory", owner.as_str()),
        ("era", "legacy", era),
        ("tool", "another_tool", tool.as_str()),
        ("iserr", "1", "0"),
    ] {
        hset(&mut conn, &key, field, rewritten).await;
        let got = store.get(&id, Read::WithOutcome).await;
        assert!(!format!("{got:?}").contains("alice's result"), "{field} rewritten: {got:?}");
        refused(got, "result", field);
        hset(&mut conn, &key, field, original).await;
        let back = store.get(&id, Read::WithOutcome).await.expect("get").expect("found");
        assert!(matches!(back.outcome, Some(TaskOutcome::Result(ref r)) if r.contains("alice's result")));
    }
}

#[tokio::test]
async fn plain_and_older_sealed_values_read_only_in_tasks_created_before_the_cutover() {
    let server = RedisServer::start();
    let mut plain_opts = options(&server);
    plain_opts.at_rest = Some(at_rest(false));
    let prefix = plain_opts.prefix.clone();
    let mut sealed_opts = plain_opts.clone();
    sealed_opts.at_rest = Some(at_rest(true));
    let mut conn = raw(&server).await;
    // A replica that writes plain values (sealing off, or a release before sealing).
    let plain = RedisStore::connect(plain_opts).await.expect("connects");

    // Before the cutover: a plain task, and one whose arguments a release before the owner
    // binding sealed.
    let Created::New(old_plain) = plain.create(task(r#"{"n":"old-plain"}"#, &[])).await.expect("create") else {
        panic!("new")
    };
    let Created::New(old_sealed) = plain.create(task("{}", &[])).await.expect("create") else { panic!("new") };
    let key = task_key(&mut conn, &prefix, old_sealed.id.as_str()).await;
    hset(&mut conn, &key, "args", &sealed_the_old_way(old_sealed.id.as_str(), "args", r#"{"n":"old-sealed"}"#)).await;

    let cutover = redis_now(&mut conn).await + 1;
    set_cutover(&mut conn, &prefix, cutover).await;
    until_past(&mut conn, cutover).await;
    let sealed = RedisStore::connect(sealed_opts).await.expect("connects");

    // After it: the same kinds of values.
    let Created::New(new_plain) = plain.create(task(r#"{"n":"new-plain"}"#, &[])).await.expect("create") else {
        panic!("new")
    };
    let Created::New(new_sealed) = plain.create(task("{}", &[])).await.expect("create") else { panic!("new") };
    let key = task_key(&mut conn, &prefix, new_sealed.id.as_str()).await;
    hset(&mut conn, &key, "args", &sealed_the_old_way(new_sealed.id.as_str(), "args", r#"{"n":"new-sealed"}"#)).await;

    let args = |r: Option<mcpgate_store::TaskRecord>| r.expect("found").arguments;
    assert_eq!(args(sealed.get(&old_plain.id, Read::Full).await.expect("reads")), r#"{"n":"old-plain"}"#);
    assert_eq!(args(sealed.get(&old_sealed.id, Read::Full).await.expect("reads")), r#"{"n":"old-sealed"}"#);
    refused(sealed.get(&new_plain.id, Read::Full).await, "args", "a plain value after the cutover");
    refused(sealed.get(&new_sealed.id, Read::Full).await, "args", "an older sealed value after the cutover");
    // A replica with sealing off reads every format, as before.
    assert_eq!(args(plain.get(&new_plain.id, Read::Full).await.expect("reads")), r#"{"n":"new-plain"}"#);
    assert_eq!(args(plain.get(&new_sealed.id, Read::Full).await.expect("reads")), r#"{"n":"new-sealed"}"#);
}
