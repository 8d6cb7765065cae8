//! `mcpgate-loadgen`: N concurrent virtual clients drive an MCP endpoint with a mix of
//! flows (sync calls, tasks of both eras, multi-round input, cancels), verify every result,
//! show progress, and report throughput, latency percentiles, failures and task accounting
//! (with a counted tool, its runs from the tool's ledger). The exit code is 1 when any
//! acknowledged task went missing or stuck, a result was duplicated or wrong, or a task ran
//! twice (2 on bad usage or when `--max-failures` is exceeded).

mod flows;
mod ledger;
mod mcp;
mod options;
mod report;
mod stats;

use std::collections::HashSet;
use std::io::Write as _;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser as _;
use tokio::time::Instant;

use flows::{Client, Shared};
use options::{Mix, Options};
use report::Report;
use stats::Stats;

/// Counters the progress bar reads.
#[derive(Debug, Default)]
struct Progress {
    started: AtomicU64,
    ok: AtomicU64,
    failed: AtomicU64,
}

fn main() -> std::process::ExitCode {
    let options = Options::parse();
    let mix = match options.validate() {
        Ok(mix) => mix,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcpgate-loadgen: {e:#}");
            return std::process::ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcpgate-loadgen: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    match runtime.block_on(run(options, mix)) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "mcpgate-loadgen: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn run(options: Options, mix: Mix) -> anyhow::Result<u8> {
    let shared = Arc::new(Shared {
        mcp: mcp::Mcp::new(&options.url, options.authorization.clone(), options.clients)?,
        poll: options.poll_ms.map(Duration::from_millis),
        deadline: options.task_deadline(),
        task_seconds: options.task_seconds,
        echo_tool: options.echo_tool.clone(),
        counted_tool: options.counted_tool.clone(),
        counted_keys: Mutex::new(Vec::new()),
        seen: Mutex::new(HashSet::new()),
    });
    let progress = Arc::new(Progress::default());
    let mix = Arc::new(mix);
    let started = Instant::now();
    let stop_at = options.flows.is_none().then(|| started + Duration::from_secs_f64(options.duration));
    let budget = options.flows;
    let bar = progress_bar(&options, &progress, started);

    let nonce: Arc<str> = options.run_tag.clone().unwrap_or_else(run_nonce).into();
    let mut handles = Vec::with_capacity(options.clients);
    for index in 0..options.clients {
        let (shared, progress, mix, nonce) = (shared.clone(), progress.clone(), mix.clone(), nonce.clone());
        handles.push(tokio::spawn(async move {
            let mut client = Client::new(&nonce, index);
            let mut stats = Stats::default();
            // A per-client xorshift: scenario draws need no shared state.
            let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ (index as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            loop {
                if stop_at.is_some_and(|at| Instant::now() >= at) {
                    break;
                }
                if let Some(budget) = budget
                    && progress.started.fetch_add(1, Ordering::Relaxed) >= budget
                {
                    break;
                }
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let scenario = mix.pick(u32::try_from(rng >> 32).unwrap_or(0));
                let done = client.run(&shared, scenario).await;
                let counter = if done.outcome.is_ok() { &progress.ok } else { &progress.failed };
                counter.fetch_add(1, Ordering::Relaxed);
                stats.record(done);
            }
            stats
        }));
    }
    let mut stats = Stats::default();
    for handle in handles {
        stats.merge(handle.await.context("a client task panicked")?);
    }
    let elapsed = started.elapsed();
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }

    let runs = match &options.run_ledger_tool {
        Some(tool) => {
            let keys =
                std::mem::take(&mut *shared.counted_keys.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
            let id = format!("lg{nonce}-ledger");
            Some(ledger::read(&shared.mcp, &id, tool, &keys, shared.deadline).await)
        }
        None => None,
    };
    let report =
        Report::new(&options.url, options.clients, mix.describe(), elapsed, &stats, shared.mcp.requests_sent(), runs);
    let markdown = report.markdown();
    let mut out = std::io::stdout().lock();
    writeln!(out, "{markdown}")?;
    if let Some(path) = &options.report_json {
        std::fs::write(path, serde_json::to_vec_pretty(&report)?).with_context(|| format!("writing {path}"))?;
    }
    if let Some(path) = &options.report_md {
        std::fs::write(path, &markdown).with_context(|| format!("writing {path}"))?;
    }
    if report.integrity_failures > 0 {
        return Ok(1);
    }
    if options.max_failures.is_some_and(|max| report.flows_failed > max) {
        return Ok(2);
    }
    Ok(0)
}

/// A progress bar on stderr, refreshed four times a second (none when quiet or not a TTY).
fn progress_bar(options: &Options, progress: &Arc<Progress>, started: Instant) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal as _;
    if options.quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let bar = match options.flows {
        Some(n) => indicatif::ProgressBar::new(n),
        None => indicatif::ProgressBar::new((options.duration * 1000.0) as u64),
    };
    let style =
        indicatif::ProgressStyle::with_template("{elapsed_precise} [{bar:30}] {msg}").ok()?.progress_chars("=> ");
    bar.set_style(style);
    let (bar2, progress, by_flows) = (bar.clone(), progress.clone(), options.flows.is_some());
    tokio::spawn(async move {
        loop {
            let ok = progress.ok.load(Ordering::Relaxed);
            let failed = progress.failed.load(Ordering::Relaxed);
            let elapsed = started.elapsed();
            bar2.set_position(if by_flows { ok + failed } else { elapsed.as_millis() as u64 });
            bar2.set_message(format!(
                "{ok} ok, {failed} failed, {:.0} flows/s",
                ok as f64 / elapsed.as_secs_f64().max(0.001)
            ));
            if bar2.is_finished() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    });
    Some(bar)
}

/// A short tag telling this run's requests and tasks from an earlier run's (clock and pid).
fn run_nonce() -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let mixed = (nanos as u64) ^ (u64::from(std::process::id()) << 32);
    format!("{:08x}", mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32)
}
