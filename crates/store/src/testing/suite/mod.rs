//! The store conformance suite: every clause of the `TaskStore`, `JobQueue` and `EventBus`
//! contracts, run against a fresh store per check (the memory store, and Redis with a fresh
//! key prefix). Each file holds the checks of one part of the contract; this one the helpers
//! they share and the order they run in.

mod fleet;
mod input;
mod leases;
mod operators;
mod pins;
mod records;
mod shared;
mod vault;

use std::future::Future;
use std::time::Duration;

use mcpgate_protocol::Era;

use super::wait::{Look, wait_every};
use crate::contract::{EventBus, JobQueue, Locks, OnceMarks, RateLimits, TaskAdmin, TaskStore, UpstreamLists, Vault};
use crate::model::{
    CheckedAnswer, CheckedAnswers, Idempotency, Job, NewTask, RawAnswer, RawAnswers, RawByKey, RawRequests, TaskEvent,
    TaskId,
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
    records::create_get_and_idempotency(&make().await).await;
    records::list_pages_by_owner(&make().await).await;
    records::run_to_completion_with_events(&make().await).await;
    records::a_failed_run_keeps_how_far_it_got(&make().await).await;
    records::cancel_is_idempotent_and_final(&make().await).await;
    leases::stale_leases_cannot_write(&make().await).await;
    leases::checkpoints_survive_the_run_that_wrote_them(&make().await).await;
    leases::attempts_run_out(&make().await).await;
    records::lifetime_ends(&make().await).await;
    input::park_waits_for_input(&make().await).await;
    input::held_tasks_resume_in_place_while_their_lease_lives(&make().await).await;
    shared::published_events_reach_subscribers(&make().await).await;
    shared::published_changes_reach_every_listener(&make().await).await;
    leases::released_tasks_run_again_at_once(&make().await).await;
    leases::renewed_jobs_are_not_reclaimed(&make().await).await;
    leases::reclaim_reaches_every_pending_job(&make().await).await;
    input::answers_gathered_before_creation_reach_the_first_run(&make().await).await;
    shared::marks_are_single_use(&make().await).await;
    records::settling_twice_writes_once(&make().await).await;
    leases::deferred_tasks_go_round_then_fail(&make().await).await;
    leases::handed_back_jobs_reach_another_worker(&make().await).await;
    leases::running_tasks_start_leased_and_are_taken_over_when_it_lapses(&make().await).await;
    shared::upstream_lists_are_shared_with_a_generation(&make().await).await;
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

/// Runs the checks of the fleet's heartbeats, each against a store made by `make`.
pub async fn run_fleet_suite<S, F, Fut>(make: F)
where
    S: crate::contract::Fleet,
    F: Fn() -> Fut,
    Fut: Future<Output = S>,
{
    fleet::heartbeats_list_live_replicas_until_they_leave_or_lapse(&make().await).await;
    fleet::heartbeats_are_bounded(&make().await).await;
}
