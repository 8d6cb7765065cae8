//! Per-client tallies of finished flows, merged at the end: latency histograms (HDR, in
//! microseconds) per scenario, failures by kind, and what happened to every task created.
//!
//! Invariant: each client records into its own `Stats`, so the hot path takes no lock.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::flows::{Done, Failure};
use crate::options::Scenario;

/// Tallies of one scenario.
#[derive(Debug, Clone)]
pub(crate) struct ScenarioStats {
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    /// Latency of successful flows, in microseconds.
    pub(crate) latency: Histogram<u64>,
}

impl ScenarioStats {
    fn new() -> Self {
        // 1 µs .. 10 min at 3 significant digits.
        let latency = Histogram::new_with_bounds(1, 600_000_000, 3).unwrap_or_else(|_| Histogram::new(3).expect("hdr"));
        Self { ok: 0, failed: 0, latency }
    }
}

/// Everything counted in a run (or a part of it).
#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub(crate) scenarios: BTreeMap<Scenario, ScenarioStats>,
    /// Flows that failed, by kind of failure.
    pub(crate) failures: BTreeMap<String, u64>,
    /// A sample failure message per kind.
    pub(crate) examples: BTreeMap<String, String>,
    /// Tasks that ended `failed`, by the task's error message: one sample per kind cannot tell
    /// a run a fault interrupted from any other failure, this does.
    pub(crate) task_failures: BTreeMap<String, u64>,
    /// Transient failures a retry got past.
    pub(crate) retried: u64,
    /// Tasks created, and how many of them ended (missing and stuck ones are failure kinds).
    pub(crate) tasks_created: u64,
    pub(crate) tasks_ended: u64,
    /// Of the created tasks, those whose creation the server answered with the result.
    pub(crate) tasks_answered_inline: u64,
}

impl Stats {
    pub(crate) fn record(&mut self, done: Done) {
        let entry = self.scenarios.entry(done.scenario).or_insert_with(ScenarioStats::new);
        self.retried += u64::from(done.retried);
        if done.created_task {
            self.tasks_created += 1;
        }
        if done.answered_inline {
            self.tasks_answered_inline += 1;
        }
        match done.outcome {
            Ok(()) => {
                entry.ok += 1;
                let micros = u64::try_from(done.elapsed.as_micros()).unwrap_or(u64::MAX).max(1);
                entry.latency.saturating_record(micros);
                if done.created_task {
                    self.tasks_ended += 1;
                }
            }
            Err(failure) => {
                entry.failed += 1;
                // A task that ended, but not as it should (wrongly, or failed visibly).
                if done.created_task && matches!(failure, Failure::Wrong(_) | Failure::TaskFailed(_)) {
                    self.tasks_ended += 1;
                }
                if let Failure::TaskFailed(said) = &failure {
                    *self.task_failures.entry(task_error(said)).or_default() += 1;
                }
                let kind = failure.kind();
                *self.failures.entry(kind.clone()).or_default() += 1;
                self.examples.entry(kind).or_insert_with(|| describe(&failure));
            }
        }
    }

    pub(crate) fn merge(&mut self, other: Stats) {
        for (scenario, s) in other.scenarios {
            let entry = self.scenarios.entry(scenario).or_insert_with(ScenarioStats::new);
            entry.ok += s.ok;
            entry.failed += s.failed;
            let _ = entry.latency.add(&s.latency);
        }
        for (kind, n) in other.failures {
            *self.failures.entry(kind).or_default() += n;
        }
        for (kind, example) in other.examples {
            self.examples.entry(kind).or_insert(example);
        }
        for (message, n) in other.task_failures {
            *self.task_failures.entry(message).or_default() += n;
        }
        self.retried += other.retried;
        self.tasks_created += other.tasks_created;
        self.tasks_ended += other.tasks_ended;
        self.tasks_answered_inline += other.tasks_answered_inline;
    }

    /// Flows that failed with `kind`.
    pub(crate) fn failed_with(&self, kind: &str) -> u64 {
        self.failures.get(kind).copied().unwrap_or(0)
    }

    /// Failures that mean a result was lost (missing or stuck), duplicated or wrong (a task
    /// that failed visibly, `task_failed`, is none of these: its client was told).
    pub(crate) fn integrity_failures(&self) -> u64 {
        ["acknowledged_missing", "stuck", "duplicate", "wrong"].iter().map(|k| self.failed_with(k)).sum()
    }

    pub(crate) fn total_failures(&self) -> u64 {
        self.failures.values().sum()
    }

    pub(crate) fn total_ok(&self) -> u64 {
        self.scenarios.values().map(|s| s.ok).sum()
    }
}

fn describe(failure: &Failure) -> String {
    let text = match failure {
        Failure::Call(e) => e.to_string(),
        Failure::Wrong(s)
        | Failure::Missing(s)
        | Failure::Stuck(s)
        | Failure::Duplicate(s)
        | Failure::TaskFailed(s) => s.clone(),
    };
    text.chars().take(300).collect()
}

/// The task's error message in a [`Failure::TaskFailed`] ("task <id> failed: <message>"),
/// without the id (so failures group by message), bounded.
fn task_error(said: &str) -> String {
    let message = said.split_once(" failed: ").map_or(said, |(_, message)| message);
    message.chars().take(200).collect()
}

/// Microseconds as milliseconds with two decimals.
pub(crate) fn ms(micros: u64) -> f64 {
    (micros as f64 / 10.0).round() / 100.0
}

/// A duration in seconds, for throughput.
pub(crate) fn secs(d: Duration) -> f64 {
    d.as_secs_f64().max(1e-9)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(task: &str, message: &str) -> Done {
        Done {
            scenario: Scenario::Task,
            elapsed: Duration::from_millis(1),
            outcome: Err(Failure::TaskFailed(format!("task {task} failed: {message}"))),
            retried: 0,
            created_task: true,
            answered_inline: false,
        }
    }

    #[test]
    fn failed_tasks_are_counted_by_their_message_in_every_part() {
        let (mut one, mut two) = (Stats::default(), Stats::default());
        one.record(failed("t-1", "Task interrupted: stopped"));
        one.record(failed("t-2", "Task interrupted: stopped"));
        two.record(failed("t-3", "the tool broke"));
        two.record(failed("t-4", "Task interrupted: stopped"));
        one.merge(two);
        let counted: Vec<(&str, u64)> = one.task_failures.iter().map(|(m, n)| (m.as_str(), *n)).collect();
        assert_eq!(counted, [("Task interrupted: stopped", 3), ("the tool broke", 1)]);
        assert_eq!(one.failed_with("task_failed"), 4);
        assert_eq!(one.tasks_ended, 4, "a task that failed visibly ended");
    }
}
