//! One `mcpgate` process: started with flags and environment, its bound address read from
//! stdout, its stderr kept in a temp file, killed on drop.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Context, bail};

use crate::wait::{Look, wait_for_blocking};

/// How long a process may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The `mcpgate` binary: `MCPGATE_BIN`, else the one cargo built next to this test.
pub fn binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("MCPGATE_BIN") {
        return Ok(PathBuf::from(path));
    }
    // Test executables live in target/<profile>/deps, harness binaries (mcpgate-cluster) in
    // target/<profile>, next to mcpgate itself.
    let exe = std::env::current_exe().context("locating the running executable")?;
    let dir = exe.parent().context("executable has no parent dir")?;
    let candidates = [Some(dir.join("mcpgate")), dir.parent().map(|profile| profile.join("mcpgate"))];
    let Some(candidate) = candidates.into_iter().flatten().find(|c| c.is_file()) else {
        bail!(
            "mcpgate binary not found next to {}: run `cargo build -p mcpgate` (or `cargo test --workspace`, which \
             builds it) or set MCPGATE_BIN",
            exe.display()
        );
    };
    Ok(candidate)
}

/// The `mcpgate-loadgen` binary: `MCPGATE_LOADGEN_BIN`, or next to `mcpgate`.
pub fn loadgen_binary() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("MCPGATE_LOADGEN_BIN") {
        return Ok(PathBuf::from(path));
    }
    let candidate = binary()?.with_file_name("mcpgate-loadgen");
    if !candidate.is_file() {
        bail!(
            "mcpgate-loadgen not found at {}: run `cargo build --workspace` (or `cargo test --workspace`, which builds \
             it) or set MCPGATE_LOADGEN_BIN",
            candidate.display()
        );
    }
    Ok(candidate)
}

/// Configures a process before it starts.
#[derive(Debug, Default)]
pub struct GatewayBuilder {
    args: Vec<String>,
    env: Vec<(String, String)>,
    /// A program built on the mcpgate library instead of the `mcpgate` binary.
    program: Option<PathBuf>,
}

/// The example program `name` of the mcpgate crate (`cargo test --workspace` builds it, into
/// target/<profile>/examples).
pub fn example_binary(name: &str) -> anyhow::Result<PathBuf> {
    let candidate = binary()?.with_file_name("examples").join(name);
    if !candidate.is_file() {
        bail!(
            "example {name} not found at {}: run `cargo build -p mcpgate --examples` (or `cargo test --workspace`, \
             which builds it)",
            candidate.display()
        );
    }
    Ok(candidate)
}

impl GatewayBuilder {
    /// Adds command-line arguments.
    pub fn args(mut self, args: &[&str]) -> Self {
        self.args.extend(args.iter().map(|a| (*a).to_owned()));
        self
    }

    /// Sets an environment variable of the child only.
    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    /// Runs the example program `name` instead of `mcpgate` (it takes its settings from the
    /// environment only).
    pub fn example(mut self, name: &str) -> anyhow::Result<Self> {
        self.program = Some(example_binary(name)?);
        Ok(self)
    }

    /// Starts the process on an ephemeral loopback port (unless `--listen` was given) and
    /// waits for its address.
    pub fn start(self) -> anyhow::Result<Gateway> {
        let logs = tempfile::NamedTempFile::new().context("creating a log file")?;
        let mut cmd = match &self.program {
            Some(program) => Command::new(program),
            None => Command::new(binary()?),
        };
        if self.program.is_none() && !self.args.iter().any(|a| a == "--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        cmd.args(&self.args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(logs.reopen().context("opening the log file")?);
        if self.program.is_some() && !self.env.iter().any(|(k, _)| k == "MCPGATE_LISTEN") {
            cmd.env("MCPGATE_LISTEN", "127.0.0.1:0");
        }
        let mut child = cmd.spawn().context("spawning mcpgate")?;
        let stdout = child.stdout.take().context("no stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            // The admin API's address comes first when there is one.
            let mut first = lines.next();
            if let Some(Ok(line)) = &first
                && line.starts_with("admin listening on http://")
            {
                let _ = tx.send(first);
                first = lines.next();
            }
            let _ = tx.send(first);
            // Keep draining so the child never blocks on a full pipe.
            for _ in lines {}
        });
        let mut gateway = Gateway { child, addr: String::new(), admin: None, logs };
        let mut line = rx.recv_timeout(START_TIMEOUT);
        if let Ok(Some(Ok(admin))) = &line
            && let Some(addr) = admin.strip_prefix("admin listening on http://")
        {
            gateway.admin = Some(addr.trim().to_owned());
            line = rx.recv_timeout(START_TIMEOUT);
        }
        match line {
            Ok(Some(Ok(line))) => match line.strip_prefix("listening on http://") {
                Some(addr) => gateway.addr = addr.trim().to_owned(),
                None => bail!("unexpected first stdout line {line:?}\n{}", gateway.logs()),
            },
            _ => bail!("mcpgate printed no address within {START_TIMEOUT:?}\n{}", gateway.logs()),
        }
        Ok(gateway)
    }
}

/// A running `mcpgate`.
#[derive(Debug)]
pub struct Gateway {
    child: Child,
    addr: String,
    /// The admin API's address, when it has one.
    admin: Option<String>,
    logs: tempfile::NamedTempFile,
}

impl Gateway {
    /// A process with default settings.
    pub fn builder() -> GatewayBuilder {
        GatewayBuilder::default()
    }

    /// `host:port` of its admin API, when `admin.listen` is set.
    pub fn admin_addr(&self) -> Option<&str> {
        self.admin.as_deref()
    }

    /// `host:port` it listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// `http://host:port/mcp`.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Everything the process wrote to stderr so far.
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.logs.path()).unwrap_or_default()
    }

    /// `kill -9`: stops at once, no cleanup.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory (VmRSS) in KiB, from /proc.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))?;
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .context("no VmRSS in /proc status")
    }

    /// Sends SIGTERM.
    pub fn terminate(&self) -> anyhow::Result<()> {
        let status =
            Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().context("running kill")?;
        if !status.success() {
            bail!("kill -TERM failed");
        }
        Ok(())
    }

    /// Waits (bounded) for the process to exit.
    ///
    /// # Panics
    ///
    /// When it still runs after `timeout` (its log is printed as it drops).
    pub fn wait(&mut self, timeout: Duration) -> anyhow::Result<ExitStatus> {
        let child = &mut self.child;
        Ok(wait_for_blocking(format!("mcpgate on {} to exit", self.addr), timeout, || {
            Ok(child.try_wait().context("waiting for mcpgate")?.map_or_else(|| Look::not_yet("running"), Look::Done))
        }))
    }
}

impl Drop for Gateway {
    #[allow(clippy::print_stderr, reason = "a failing test shows the child's log on stderr")]
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- mcpgate {} stderr ---\n{}", self.addr, self.logs());
        }
    }
}

/// Runs `mcpgate` with arguments to completion (bounded) and returns (status, stdout, stderr).
pub fn run_to_end(args: &[&str], env: &[(&str, &str)]) -> anyhow::Result<(ExitStatus, String, String)> {
    let child = Command::new(binary()?)
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("spawning mcpgate")?;
    // Killed if the wait fails (its Drop), so no mcpgate outlives a failed test.
    let mut child = KillOnDrop(Some(child));
    let running = child.0.as_mut().context("no child")?;
    wait_for_blocking(format!("mcpgate {args:?} to finish"), Duration::from_secs(30), || {
        Ok(running.try_wait().context("waiting for mcpgate")?.is_some())
    });
    let out = child.0.take().context("no child")?.wait_with_output()?;
    Ok((out.status, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into()))
}

/// A child process killed and reaped if dropped before it was taken out.
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
