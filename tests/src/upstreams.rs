//! Real MCP servers to put behind mcpgate: the reference `server-everything` (npm) over stdio
//! or Streamable HTTP, and a FastMCP (PyPI) server speaking 2026-07-28, as installed by the
//! test command under `.cache/test-tools` (or where `MCPGATE_TEST_SERVER_EVERYTHING` and
//! `MCPGATE_TEST_PYTHON` say). A missing server is an error saying how to install it, never
//! a skipped test. A server is ready once it answers as one (not merely once something listens
//! on its port), and every process is killed when its handle drops.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::probe;
use crate::wait::{Look, wait_for_blocking};

/// How long a server may take to answer its first request (node and Python start slowly on a
/// busy machine).
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The repository root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

/// `server-everything`'s entry point (run it with `node <path> stdio|streamableHttp`).
pub fn server_everything() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("MCPGATE_TEST_SERVER_EVERYTHING").map_or_else(
        || root().join(".cache/test-tools/node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
        PathBuf::from,
    );
    if !path.is_file() {
        bail!(
            "{} not found: run scripts/test (it installs @modelcontextprotocol/server-everything) or set \
             MCPGATE_TEST_SERVER_EVERYTHING",
            path.display()
        );
    }
    Ok(path)
}

/// The Python of the venv that has `fastmcp` (made by scripts/test).
pub fn fastmcp_python() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("MCPGATE_TEST_PYTHON")
        .map_or_else(|| root().join(".cache/test-tools/fastmcp-venv/bin/python"), PathBuf::from);
    if !path.is_file() {
        bail!("{} not found: run scripts/test (it installs fastmcp) or set MCPGATE_TEST_PYTHON", path.display());
    }
    Ok(path)
}

/// A fixture script under `tests/interop`.
pub fn fixture(name: &str) -> PathBuf {
    root().join("tests/interop").join(name)
}

/// A free loopback port (bound and released: a process started next may take it).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A server process on a loopback port, killed on drop.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    port: u16,
    path: &'static str,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl HttpServer {
    /// `server-everything` over Streamable HTTP (a 2025-11-25 server with sessions).
    pub fn everything() -> anyhow::Result<Self> {
        let script = server_everything()?;
        let port = free_port()?;
        Self::start(
            "node",
            &[script.to_string_lossy().as_ref(), "streamableHttp"],
            port,
            "/mcp",
            &[("PORT", &port.to_string())],
        )
    }

    /// `server-everything` over the 2024-11-05 HTTP+SSE transport (its URL ends in `/sse`).
    pub fn everything_sse() -> anyhow::Result<Self> {
        let script = server_everything()?;
        let port = free_port()?;
        Self::start("node", &[script.to_string_lossy().as_ref(), "sse"], port, "/sse", &[("PORT", &port.to_string())])
    }

    /// The FastMCP fixture server (2026-07-28); its markers go to `markers`.
    pub fn fastmcp(markers: &std::path::Path) -> anyhow::Result<Self> {
        Self::fastmcp_script("fastmcp_server.py", markers)
    }

    /// Another FastMCP fixture script under `tests/interop` (arguments: port, marker dir).
    pub fn fastmcp_script(name: &str, markers: &std::path::Path) -> anyhow::Result<Self> {
        Self::fastmcp_script_on(name, markers, free_port()?, &[])
    }

    /// A FastMCP fixture script on `port` with `env` (a test that restarts an upstream starts
    /// it again on the port it had, so the gateway's configured URL still reaches it).
    pub fn fastmcp_script_on(
        name: &str,
        markers: &std::path::Path,
        port: u16,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let python = fastmcp_python()?;
        let script = fixture(name);
        Self::start(
            python.to_string_lossy().as_ref(),
            &[script.to_string_lossy().as_ref(), &port.to_string(), markers.to_string_lossy().as_ref()],
            port,
            "/mcp",
            env,
        )
    }

    /// Its port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Starts `program` and waits until it answers as the MCP server at `path` on `port`: an
    /// `initialize` answered with its `serverInfo` (Streamable HTTP), or the `endpoint` event
    /// that opens an HTTP+SSE stream (`/sse`).
    ///
    /// # Panics
    ///
    /// When it exits or does not answer so within 60 s (with what it printed).
    fn start(
        program: &str,
        args: &[&str],
        port: u16,
        path: &'static str,
        env: &[(&str, &str)],
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let log = dir.path().join("server.log");
        let out = std::fs::File::create(&log)?;
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("starting {program}"))?;
        let mut server = Self { child, port, path, log, _dir: dir };
        let (request, expect) = match path {
            "/sse" => (probe::get(path), "event: endpoint"),
            _ => (probe::initialize(path), "\"serverInfo\""),
        };
        wait_for_blocking(format!("{program} to answer as an MCP server on {}", server.url()), START_TIMEOUT, || {
            if let Some(status) = server.child.try_wait()? {
                anyhow::bail!("{program} exited ({status}) before answering: {}", server.log());
            }
            Ok(match probe::answers(port, &request, expect) {
                Look::NotYet(seen) => Look::NotYet(format!("{seen}\n{}", server.log())),
                done => done,
            })
        });
        Ok(server)
    }

    /// Its MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}{}", self.port, self.path)
    }

    /// What it printed.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Kills it now (`kill -9`).
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}
