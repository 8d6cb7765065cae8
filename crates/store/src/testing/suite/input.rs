//! The suite's checks of tasks that wait for input: parking with requests, answers (partial,
//! checked, gathered before creation) and resuming in place while the lease lives.

use std::time::Duration;

use mcpgate_protocol::task::TaskStatus;

use super::{FORM, LEASE, MAX_ANSWER_BYTES, asks, checked, event, form_answers, new_task, next_job, raw};
use crate::contract::{EventBus, JobQueue, TaskStore};
use crate::model::{Answered, Claim, Read, Renewal, Settled, Skip, TaskEvent, TaskOutcome};

const CONFIRM: &str =
    r#"{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":{"type":"object"}}}"#;

const NAME: &str =
    r#"{"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object"}}}"#;

pub(super) async fn held_tasks_resume_in_place_while_their_lease_lives<S: TaskStore + JobQueue + EventBus>(store: &S) {
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

pub(super) async fn park_waits_for_input<S: TaskStore + JobQueue + EventBus>(store: &S) {
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

pub(super) async fn answers_gathered_before_creation_reach_the_first_run<S: TaskStore + JobQueue>(store: &S) {
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
