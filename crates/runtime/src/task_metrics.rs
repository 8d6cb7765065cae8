//! Task counters by tool and event, for `/metrics`: what was created, how tasks ended, how
//! many were taken over from a dead replica, how many calls were answered with their task's
//! outcome, and how often a lease could not be renewed.
//!
//! Invariant: the tool label comes from the catalog's fixed set (anything else is "other"),
//! so no client input can grow the number of series; counting is a lookup and a relaxed
//! increment.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// What happened to a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskMetric {
    /// Created (durably).
    Created,
    /// Ended `completed`.
    Completed,
    /// Ended `failed` (a protocol error, or no attempt finished).
    Failed,
    /// Cancelled by its owner.
    Cancelled,
    /// Found past its lifetime by a worker (queued, running or finishing).
    Expired,
    /// Run again by another replica after its executor stopped renewing its lease.
    Reclaimed,
    /// Ended within `tasks.answer_within_ms` of its creation, and its call (2026-07-28) was
    /// answered with its outcome instead of the task.
    AnsweredInline,
}

const EVENTS: [(TaskMetric, &str); 7] = [
    (TaskMetric::Created, "created"),
    (TaskMetric::Completed, "completed"),
    (TaskMetric::Failed, "failed"),
    (TaskMetric::Cancelled, "cancelled"),
    (TaskMetric::Expired, "expired"),
    (TaskMetric::Reclaimed, "reclaimed"),
    (TaskMetric::AnsweredInline, "answered_inline"),
];

/// Counters of one replica.
#[derive(Debug)]
pub struct TaskMetrics {
    /// Tool names, then "other".
    tools: Vec<String>,
    index: HashMap<String, usize>,
    counts: Vec<AtomicU64>,
    renew_failures: AtomicU64,
}

impl TaskMetrics {
    /// Counters for these tools (plus "other").
    pub fn new<'a>(tools: impl IntoIterator<Item = &'a str>) -> Self {
        let mut names: Vec<String> = tools.into_iter().map(str::to_owned).collect();
        names.push("other".to_owned());
        let index = names.iter().enumerate().map(|(i, n)| (n.clone(), i)).collect();
        let counts = (0..names.len() * EVENTS.len()).map(|_| AtomicU64::new(0)).collect();
        Self { tools: names, index, counts, renew_failures: AtomicU64::new(0) }
    }

    /// Counts `event` for `tool`.
    pub fn count(&self, tool: &str, event: TaskMetric) {
        let t = self.index.get(tool).copied().unwrap_or(self.tools.len() - 1);
        let e = EVENTS.iter().position(|(m, _)| *m == event).unwrap_or(0);
        self.counts[t * EVENTS.len() + e].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a lease renewal that failed (the store did not answer).
    pub fn renew_failure(&self) {
        self.renew_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// How many `event`s for `tool` so far.
    pub fn get(&self, tool: &str, event: TaskMetric) -> u64 {
        let t = self.index.get(tool).copied().unwrap_or(self.tools.len() - 1);
        let e = EVENTS.iter().position(|(m, _)| *m == event).unwrap_or(0);
        self.counts[t * EVENTS.len() + e].load(Ordering::Relaxed)
    }

    /// Appends the Prometheus text exposition (series with a zero count are left out).
    pub fn render(&self, out: &mut String) {
        out.push_str("# HELP mcpgate_tasks_total Task events on this replica, by tool and event.\n");
        out.push_str("# TYPE mcpgate_tasks_total counter\n");
        for (t, tool) in self.tools.iter().enumerate() {
            for (e, (_, event)) in EVENTS.iter().enumerate() {
                let n = self.counts[t * EVENTS.len() + e].load(Ordering::Relaxed);
                if n > 0 {
                    let _ = writeln!(out, "mcpgate_tasks_total{{tool=\"{tool}\",event=\"{event}\"}} {n}");
                }
            }
        }
        out.push_str("# HELP mcpgate_task_lease_renew_failures_total Lease renewals the store did not answer.\n");
        out.push_str("# TYPE mcpgate_task_lease_renew_failures_total counter\n");
        let _ =
            writeln!(out, "mcpgate_task_lease_renew_failures_total {}", self.renew_failures.load(Ordering::Relaxed));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_tools_count_as_other_and_zero_series_are_left_out() {
        let m = TaskMetrics::new(["echo", "slow"]);
        m.count("slow", TaskMetric::Created);
        m.count("slow", TaskMetric::Created);
        m.count("made-up", TaskMetric::Failed);
        m.renew_failure();
        let mut out = String::new();
        m.render(&mut out);
        assert!(out.contains("mcpgate_tasks_total{tool=\"slow\",event=\"created\"} 2\n"), "{out}");
        assert!(out.contains("mcpgate_tasks_total{tool=\"other\",event=\"failed\"} 1\n"), "{out}");
        assert!(!out.contains("tool=\"echo\""), "{out}");
        assert!(out.contains("mcpgate_task_lease_renew_failures_total 1\n"), "{out}");
        assert_eq!(m.get("slow", TaskMetric::Created), 2);
    }
}
