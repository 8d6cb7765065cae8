//! A run of `mcpgate-loadgen` against a test deployment: started in the background, waited for
//! (bounded), its JSON report and exit code read back.
//!
//! Invariant: the process is killed and reaped if the run is dropped before it ended.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use crate::gateway::loadgen_binary;
use crate::upstreams::HttpServer;
use crate::wait::wait_for;

/// A running `mcpgate-loadgen`, killed if dropped early.
#[derive(Debug)]
pub struct Load {
    child: Option<Child>,
    report: PathBuf,
    _dir: tempfile::TempDir,
}

/// How a run ended.
#[derive(Debug)]
pub struct LoadReport {
    /// The exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// The JSON report.
    pub report: Value,
}

impl Load {
    /// Starts a quiet run against `url` writing a JSON report, with `args` on top.
    pub fn start(url: &str, args: &[&str]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let report = dir.path().join("report.json");
        let child = Command::new(loadgen_binary()?)
            .args(["--url", url, "--quiet", "--report-json"])
            .arg(&report)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .context("starting mcpgate-loadgen")?;
        Ok(Self { child: Some(child), report, _dir: dir })
    }

    /// Whether the run is still going (its process has not exited).
    ///
    /// # Errors
    ///
    /// The process's state cannot be read.
    pub fn running(&mut self) -> anyhow::Result<bool> {
        Ok(match self.child.as_mut() {
            Some(child) => child.try_wait()?.is_none(),
            None => false,
        })
    }

    /// Waits (bounded) for the run to end; returns its JSON report (printed for the log).
    pub async fn finish(self, within: Duration) -> anyhow::Result<Value> {
        Ok(self.finish_with_code(within).await?.report)
    }

    /// Waits (bounded) for the run to end; returns its exit code and JSON report.
    ///
    /// # Panics
    ///
    /// When the run does not end within `within`.
    pub async fn finish_with_code(mut self, within: Duration) -> anyhow::Result<LoadReport> {
        // Still owned by `self` while waiting, so a failed wait kills it.
        let running = self.child.as_mut().context("finished twice")?;
        wait_for("mcpgate-loadgen to end its run", within, async || Ok(running.try_wait()?.is_some())).await;
        let output = self.child.take().context("finished twice")?.wait_with_output()?;
        let code = output.status.code();
        let markdown = String::from_utf8_lossy(&output.stdout);
        println!("{markdown}");
        anyhow::ensure!(
            code != Some(2) || std::fs::metadata(&self.report).is_ok(),
            "mcpgate-loadgen failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        let report: Value = serde_json::from_slice(&std::fs::read(&self.report).context("reading the report")?)?;
        Ok(LoadReport { code, report })
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The load generator's options that make its task scenarios call the counted-runs fixture's
/// tool and read its run ledger, as [`counted_runs_config`] exposes them (upstream `c`).
pub const COUNTED_RUNS: [&str; 4] = ["--counted-tool", "c_count_run", "--run-ledger-tool", "c_run_ledger"];

/// Writes, in `dir`, a gateway config serving the built-in toolsets the load scenarios call
/// and `counted` (`tests/interop/counted_runs_server.py`) as upstream `c`, its `count_run` a
/// task whenever the client declares the tasks extension; returns its path (for `--config`).
pub fn counted_runs_config(dir: &Path, counted: &HttpServer) -> anyhow::Result<PathBuf> {
    let config = dir.join("mcpgate.toml");
    std::fs::write(
        &config,
        format!(
            "toolset = [\"demo\", \"conformance\"]\n\n[[upstream]]\nname = \"c\"\ntransport = \"http\"\nurl = \"{}\"\n\
             tool_task = {{ count_run = \"optional\" }}\n",
            counted.url()
        ),
    )?;
    Ok(config)
}
