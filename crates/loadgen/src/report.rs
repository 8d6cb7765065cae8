//! The run's report: per-scenario throughput and latency percentiles, failures by kind, and
//! task accounting (created, ended, lost), as JSON and as Markdown.

use std::time::Duration;

use serde::Serialize;

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
    pub(crate) lost: u64,
    pub(crate) duplicated: u64,
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
    pub(crate) tasks: Tasks,
    /// Lost, duplicated or wrong results (the exit code is 1 when this is not zero).
    pub(crate) integrity_failures: u64,
}

impl Report {
    pub(crate) fn new(url: &str, clients: usize, mix: String, elapsed: Duration, stats: &Stats, requests: u64) -> Self {
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
            tasks: Tasks {
                created: stats.tasks_created,
                ended: stats.tasks_ended,
                lost: stats.tasks_lost,
                duplicated: stats.failures.get("duplicate").copied().unwrap_or(0),
            },
            integrity_failures: stats.integrity_failures(),
        }
    }

    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "## mcpgate-loadgen: {} flows ok, {} failed in {} s ({} flows/s)\n\n\
             Target `{}`, {} clients, mix `{}`; {} HTTP requests ({}/s); {} transient failures retried.\n\n\
             | scenario | ok | failed | per second | p50 ms | p90 ms | p99 ms | max ms |\n\
             | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n",
            self.flows_ok,
            self.flows_failed,
            self.seconds,
            self.flows_per_second,
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
            "\nTasks: {} created, {} ended, {} lost, {} duplicated.\n",
            t.created, t.ended, t.lost, t.duplicated
        ));
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
