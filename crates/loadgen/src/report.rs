//! The run's report: per-scenario throughput and latency percentiles, failures by kind, and
//! task accounting (created, ended, acknowledged then missing, stuck, duplicated, run twice),
//! as JSON and as Markdown.

use std::time::Duration;

use serde::Serialize;

use crate::ledger::Runs;
use crate::stats::{Stats, ms, secs};

/// Latency percentiles in milliseconds.
#[derive(Debug, Serialize)]
pub(crate) struct Latency {
    pub(crate) p50: f64,
    pub(crate) p90: f64,
    pub(crate) p99: f64,
    pub(crate) max: f64,
}

/// One scenario's line.
#[derive(Debug, Serialize)]
pub(crate) struct ScenarioReport {
    pub(crate) scenario: &'static str,
    pub(crate) ok: u64,
    pub(crate) failed: u64,
    pub(crate) per_second: f64,
    pub(crate) latency_ms: Latency,
}

/// What happened to the tasks the run created.
#[derive(Debug, Serialize)]
pub(crate) struct Tasks {
    pub(crate) created: u64,
    pub(crate) ended: u64,
    /// Created tasks whose creation the server answered with the result (2026-07-28: ended
    /// within its answer window), each a whole lifecycle in one request.
    pub(crate) answered_inline: u64,
    /// `acknowledged_missing + stuck`.
    pub(crate) lost: u64,
    /// The client got the task's id, and later "task not found".
    pub(crate) acknowledged_missing: u64,
    /// The client got the task's id; it was not terminal by the deadline.
    pub(crate) stuck: u64,
    pub(crate) duplicated: u64,
    /// Runs of a counted task's key beyond the first (from the run ledger; 0 without one).
    pub(crate) double_runs: u64,
}

/// The whole report.
#[derive(Debug, Serialize)]
pub(crate) struct Report {
    pub(crate) url: String,
    pub(crate) clients: usize,
    pub(crate) mix: String,
    pub(crate) seconds: f64,
    pub(crate) flows_ok: u64,
    pub(crate) flows_failed: u64,
    pub(crate) flows_per_second: f64,
    /// HTTP requests sent (a flow sends one or more; retries and polls included).
    pub(crate) requests: u64,
    pub(crate) requests_per_second: f64,
    pub(crate) retried: u64,
    pub(crate) scenarios: Vec<ScenarioReport>,
    pub(crate) failures: std::collections::BTreeMap<String, u64>,
    pub(crate) failure_examples: std::collections::BTreeMap<String, String>,
    /// Tasks that ended `failed` (`failures.task_failed`), by their error message.
    pub(crate) task_failures: std::collections::BTreeMap<String, u64>,
    pub(crate) tasks: Tasks,
    /// The run ledger's totals (with --run-ledger-tool).
    pub(crate) runs: Option<Runs>,
    /// Missing, stuck, duplicated or wrong results, double runs, and an unreadable ledger (the
    /// exit code is 1 when this is not zero).
    pub(crate) integrity_failures: u64,
}

impl Report {
    pub(crate) fn new(
        url: &str,
        clients: usize,
        mix: String,
        elapsed: Duration,
        stats: &Stats,
        requests: u64,
        runs: Option<Runs>,
    ) -> Self {
        let scenarios = stats
            .scenarios
            .iter()
            .map(|(scenario, s)| ScenarioReport {
                scenario: scenario.name(),
                ok: s.ok,
                failed: s.failed,
                per_second: round(s.ok as f64 / secs(elapsed)),
                latency_ms: Latency {
                    p50: ms(s.latency.value_at_quantile(0.50)),
                    p90: ms(s.latency.value_at_quantile(0.90)),
                    p99: ms(s.latency.value_at_quantile(0.99)),
                    max: ms(s.latency.max()),
                },
            })
            .collect();
        let missing = stats.failed_with("acknowledged_missing");
        let stuck = stats.failed_with("stuck");
        let double_runs = runs.as_ref().map_or(0, |r| r.double_runs);
        let unread = runs.as_ref().map_or(0, |r| u64::from(r.error.is_some()));
        Self {
            url: url.to_owned(),
            clients,
            mix,
            seconds: round(elapsed.as_secs_f64()),
            flows_ok: stats.total_ok(),
            flows_failed: stats.total_failures(),
            flows_per_second: round(stats.total_ok() as f64 / secs(elapsed)),
            requests,
            requests_per_second: round(requests as f64 / secs(elapsed)),
            retried: stats.retried,
            scenarios,
            failures: stats.failures.clone(),
            failure_examples: stats.examples.clone(),
            task_failures: stats.task_failures.clone(),
            tasks: Tasks {
                created: stats.tasks_created,
                ended: stats.tasks_ended,
                answered_inline: stats.tasks_answered_inline,
                lost: missing + stuck,
                acknowledged_missing: missing,
                stuck,
                duplicated: stats.failed_with("duplicate"),
                double_runs,
            },
            runs,
            integrity_failures: stats.integrity_failures() + double_runs + unread,
        }
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "## mcpgate-loadgen: {} flows ok, {} failed in {} s ({} flows/s); {} acknowledged tasks missing, {} stuck, {} run twice\n\n\
             Target `{}`, {} clients, mix `{}`; {} HTTP requests ({}/s); {} transient failures retried.\n\n\
             | scenario | ok | failed | per second | p50 ms | p90 ms | p99 ms | max ms |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            self.flows_ok,
            self.flows_failed,
            self.seconds,
            self.flows_per_second,
            self.tasks.acknowledged_missing,
            self.tasks.stuck,
            self.tasks.double_runs,
            self.url,
            self.clients,
            self.mix,
            self.requests,
            self.requests_per_second,
            self.retried
        );
        for s in &self.scenarios {
            let l = &s.latency_ms;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.scenario, s.ok, s.failed, s.per_second, l.p50, l.p90, l.p99, l.max
            ));
        }
        let t = &self.tasks;
        out.push_str(&format!(
            "\nTasks: {} created ({} answered inline), {} ended, {} acknowledged then missing, {} stuck, {} duplicated, {} run twice.\n",
            t.created, t.answered_inline, t.ended, t.acknowledged_missing, t.stuck, t.duplicated, t.double_runs
        ));
        match &self.runs {
            Some(Runs { tool, error: Some(error), .. }) => {
                out.push_str(&format!("\nRun ledger `{tool}` unreadable: {}\n", error.replace('\n', " ")));
            }
            Some(r) => {
                out.push_str(&format!(
                    "\nRun ledger `{}`: {} keys, {} runs in all; this run's {} keys: {} ran, {} runs beyond the first.\n",
                    r.tool, r.ledger_keys, r.ledger_runs, r.keys, r.ran, r.double_runs
                ));
                for example in &r.examples {
                    out.push_str(&format!("- {example}\n"));
                }
            }
            None => {}
        }
        if self.failures.is_empty() {
            out.push_str("\nNo failures.\n");
        } else {
            out.push_str("\n| failure | count | example |\n| --- | ---: | --- |\n");
            for (kind, n) in &self.failures {
                let example = self.failure_examples.get(kind).map_or("", String::as_str).replace('|', "/");
                out.push_str(&format!("| {kind} | {n} | {example} |\n"));
            }
        }
        out
    }
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}
