//! Command line: where to send load, how much, for how long, and the scenario mix.
//!
//! Invariant: every option is validated before any load is sent (a bad mix or a zero
//! client count is an error message, not a silent default).

use std::time::Duration;

use anyhow::{Context as _, bail};
use clap::Parser;

/// One kind of client flow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Scenario {
    /// A synchronous 2026-07-28 `tools/call` (`echo`).
    Sync,
    /// A 2026-07-28 task: create, poll `tasks/get`, read the inline result.
    Task,
    /// A 2025-11-25 task: create in a session, wait on `tasks/result`.
    LegacyTask,
    /// A 2026-07-28 task that asks for input (`delete_records`): parked `input_required`,
    /// answered with `tasks/update`, then completed.
    TaskInput,
    /// Multi-round input, two requests (`delete_records`).
    Mrtr2,
    /// Multi-round input, three requests (`update_work_item`).
    Mrtr3,
    /// A task cancelled while it runs.
    Cancel,
    /// One `tasks/get` of a completed task (each client's own, created on its first flow).
    Get,
}

impl Scenario {
    pub(crate) const ALL: [Scenario; 8] =
        [Self::Sync, Self::Task, Self::LegacyTask, Self::TaskInput, Self::Mrtr2, Self::Mrtr3, Self::Cancel, Self::Get];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Task => "task",
            Self::LegacyTask => "legacy_task",
            Self::TaskInput => "task_input",
            Self::Mrtr2 => "mrtr2",
            Self::Mrtr3 => "mrtr3",
            Self::Cancel => "cancel",
            Self::Get => "get",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// A weighted scenario mix.
#[derive(Debug, Clone)]
pub(crate) struct Mix {
    weights: Vec<(Scenario, u32)>,
    total: u32,
}

impl Mix {
    /// Parses `sync=70,task=10,...` (weights are relative; zero weights are dropped).
    pub(crate) fn parse(text: &str) -> anyhow::Result<Self> {
        let mut weights = Vec::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part.split_once('=').unwrap_or((part, "1"));
            let scenario = Scenario::parse(name.trim()).with_context(|| {
                let known: Vec<&str> = Scenario::ALL.iter().map(|s| s.name()).collect();
                format!("unknown scenario {name:?} (known: {})", known.join(", "))
            })?;
            let weight: u32 = weight.trim().parse().with_context(|| format!("weight of {name} is not a number"))?;
            if weights.iter().any(|(s, _)| *s == scenario) {
                bail!("scenario {name} listed twice");
            }
            if weight > 0 {
                weights.push((scenario, weight));
            }
        }
        let total = weights.iter().map(|(_, w)| *w).sum();
        if total == 0 {
            bail!("the mix selects no scenario");
        }
        Ok(Self { weights, total })
    }

    /// The scenario for a draw in `0..total`.
    pub(crate) fn pick(&self, draw: u32) -> Scenario {
        let mut left = draw % self.total;
        for (scenario, weight) in &self.weights {
            if left < *weight {
                return *scenario;
            }
            left -= weight;
        }
        self.weights[0].0
    }

    /// The mix as `name=weight` pairs.
    pub(crate) fn describe(&self) -> String {
        self.weights.iter().map(|(s, w)| format!("{}={w}", s.name())).collect::<Vec<_>>().join(",")
    }
}

/// mcpgate-loadgen: drives an MCP endpoint with concurrent virtual clients and verifies every
/// result. The server must serve the `demo` and `conformance` toolsets (echo, slow_compute,
/// delete_records, update_work_item).
#[derive(Debug, Parser)]
#[command(name = "mcpgate-loadgen", version)]
pub(crate) struct Options {
    /// MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
    #[arg(long, env = "LOADGEN_URL")]
    pub(crate) url: String,
    /// Concurrent virtual clients.
    #[arg(long, default_value_t = 32, env = "LOADGEN_CLIENTS")]
    pub(crate) clients: usize,
    /// How long to send load, in seconds (ignored with --flows).
    #[arg(long, default_value_t = 30.0, env = "LOADGEN_DURATION")]
    pub(crate) duration: f64,
    /// Run this many flows in total instead of a duration.
    #[arg(long, env = "LOADGEN_FLOWS")]
    pub(crate) flows: Option<u64>,
    /// Scenario mix: sync, task, legacy_task, task_input, mrtr2, mrtr3, cancel, get with
    /// relative weights.
    #[arg(long, default_value = "sync=60,task=15,legacy_task=10,mrtr2=5,mrtr3=5,cancel=5", env = "LOADGEN_MIX")]
    pub(crate) mix: String,
    /// Poll `tasks/get` this often (ms); default: the server's pollIntervalMs.
    #[arg(long, env = "LOADGEN_POLL_MS")]
    pub(crate) poll_ms: Option<u64>,
    /// Seconds a task may take to reach a terminal status before it counts as lost.
    #[arg(long, default_value_t = 60.0)]
    pub(crate) task_deadline: f64,
    /// The tool the sync scenario calls with `{"text": ...}` and expects echoed, e.g. an
    /// upstream's echo behind the gateway (`gw_echo`).
    #[arg(long, default_value = "echo")]
    pub(crate) echo_tool: String,
    /// Seconds each `slow_compute` task computes (0 = a no-op task).
    #[arg(long, default_value_t = 0.0)]
    pub(crate) task_seconds: f64,
    /// A tool that counts its runs, called by the `task` and `legacy_task` scenarios instead of
    /// `slow_compute` with `{"key": "<run tag>-<client>-<seq>"}` (plus `seconds` when
    /// --task-seconds is set); its text must name the key.
    #[arg(long)]
    pub(crate) counted_tool: Option<String>,
    /// The counted tool's ledger (`structuredContent: {"runs": {key: count}}`), read once at
    /// the end: runs of this run's keys beyond the first are double runs. Needs --counted-tool.
    #[arg(long)]
    pub(crate) run_ledger_tool: Option<String>,
    /// The run's tag in request ids, task labels and counted keys (default: random). Must
    /// differ from every run within the server's idempotency window, or that run's tasks are
    /// handed back.
    #[arg(long)]
    pub(crate) run_tag: Option<String>,
    /// `Authorization` header value to send (e.g. "Bearer eyJ...").
    #[arg(long, env = "LOADGEN_AUTHORIZATION")]
    pub(crate) authorization: Option<String>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub(crate) report_json: Option<String>,
    /// Write the report as Markdown here.
    #[arg(long)]
    pub(crate) report_md: Option<String>,
    /// Exit with 2 when more flows than this failed (any kind of failure).
    #[arg(long)]
    pub(crate) max_failures: Option<u64>,
    /// No progress bar (also when stderr is not a terminal).
    #[arg(long)]
    pub(crate) quiet: bool,
}

impl Options {
    /// Checks the options; returns the parsed mix.
    pub(crate) fn validate(&self) -> anyhow::Result<Mix> {
        if self.clients == 0 || self.clients > 100_000 {
            bail!("--clients must be 1 to 100000");
        }
        if self.flows.is_none() && !(self.duration > 0.0 && self.duration.is_finite()) {
            bail!("--duration must be a positive number of seconds");
        }
        if !(self.task_deadline > 0.0 && self.task_deadline.is_finite()) {
            bail!("--task-deadline must be a positive number of seconds");
        }
        if !(0.0..=600.0).contains(&self.task_seconds) {
            bail!("--task-seconds must be 0 to 600");
        }
        if self.run_ledger_tool.is_some() && self.counted_tool.is_none() {
            bail!("--run-ledger-tool needs --counted-tool (the ledger counts that tool's runs)");
        }
        if let Some(tag) = &self.run_tag
            && (tag.is_empty() || tag.len() > 32 || !tag.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            bail!("--run-tag must be 1 to 32 letters, digits or underscores");
        }
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            bail!("--url must be an http:// or https:// URL");
        }
        Mix::parse(&self.mix)
    }

    pub(crate) fn task_deadline(&self) -> Duration {
        Duration::from_secs_f64(self.task_deadline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_and_pick_by_weight() {
        let mix = Mix::parse("sync=3, task=1,cancel=0").expect("valid");
        assert_eq!(mix.describe(), "sync=3,task=1");
        let picks: Vec<Scenario> = (0..4).map(|d| mix.pick(d)).collect();
        assert_eq!(picks, [Scenario::Sync, Scenario::Sync, Scenario::Sync, Scenario::Task]);
        assert!(Mix::parse("sync=1,nope=2").is_err());
        assert!(Mix::parse("sync=0").is_err());
        assert!(Mix::parse("sync=1,sync=2").is_err());
        assert!(Mix::parse("sync=x").is_err());
    }
}
