//! Payloads sealed at rest: what a Redis dump of a task's life holds, what reads give back,
//! and that sealed values open only where they were sealed.

use std::time::Duration;

use mcpgate_protocol::Era;
use mcpgate_protocol::task::TaskStatus;
use mcpgate_store::testing::RedisServer;
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
async fn plain_records_still_read_and_sealed_ones_read_after_sealing_is_turned_off() {
    let server = RedisServer::start();
    let mut plain = options(&server);
    plain.at_rest = Some(at_rest(false));
    let mut sealed = plain.clone();
    sealed.at_rest = Some(at_rest(true));
    let writes_plain = RedisStore::connect(plain).await.expect("connects");
    let writes_sealed = RedisStore::connect(sealed).await.expect("connects");

    let Created::New(a) = writes_plain.create(task(r#"{"n":"plain-argument"}"#, &[])).await.expect("create") else {
        panic!("new")
    };
    assert!(dump(&server).await.contains("plain-argument"), "written in plain when sealing is off");
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
    assert!(args.starts_with('\u{1}'), "stored sealed");
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
