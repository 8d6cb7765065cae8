//! A real `redis-server` on an ephemeral loopback port, in its own temp dir, killed (and
//! reaped) when dropped. The binary is `MCPGATE_REDIS_SERVER` or `redis-server` on `PATH`.
//! With TLS (see [`RedisServerBuilder::tls`]) it serves TLS on a second port too; the plain
//! port stays open for the harness's readiness probe.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::TestCa;
use super::wait::{Look, try_wait_for_blocking};

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// The TLS port (0 = no TLS).
    tls_port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
    /// `--tls-*` arguments naming the certificate files (empty = no TLS).
    tls: Vec<String>,
}

/// How to start a [`RedisServer`]: extra arguments, TLS.
#[derive(Debug, Default)]
pub struct RedisServerBuilder {
    extra: Vec<String>,
    tls: Vec<String>,
}

impl RedisServerBuilder {
    /// Extra `redis-server` arguments (e.g. `["--appendonly", "yes"]`).
    pub fn args(mut self, extra: &[&str]) -> Self {
        self.extra.extend(extra.iter().map(|s| (*s).to_owned()));
        self
    }

    /// Serves TLS (also) with `ca`'s server certificate; clients need not present one.
    pub fn tls(mut self, ca: &TestCa) -> Self {
        let path = |p: PathBuf| p.to_str().expect("a UTF-8 temp path").to_owned();
        self.tls = vec![
            "--tls-cert-file".to_owned(),
            path(ca.server_cert_file()),
            "--tls-key-file".to_owned(),
            path(ca.server_key_file()),
            "--tls-ca-cert-file".to_owned(),
            path(ca.ca_file()),
            "--tls-auth-clients".to_owned(),
            "no".to_owned(),
        ];
        self
    }

    /// Starts the server (persistence off unless the arguments turn it on).
    pub fn start(self) -> RedisServer {
        let dir = tempfile::tempdir().expect("temp dir for redis-server");
        let mut server = RedisServer { child: None, port: 0, tls_port: 0, dir, extra: self.extra, tls: self.tls };
        server.spawn_on_free_port();
        server
    }
}

impl RedisServer {
    /// Starts a server with persistence off.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra arguments (e.g. `["--appendonly", "yes"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        Self::builder().args(extra).start()
    }

    /// A server with more to set up than arguments (TLS).
    pub fn builder() -> RedisServerBuilder {
        RedisServerBuilder::default()
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The TLS port (started with [`RedisServerBuilder::tls`]).
    pub fn tls_port(&self) -> u16 {
        assert!(self.tls_port != 0, "this redis-server was started without TLS");
        self.tls_port
    }

    /// `rediss://127.0.0.1:<TLS port>`.
    pub fn tls_url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.tls_port())
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log")).unwrap_or_default()
    }

    /// Freezes the server (SIGSTOP): its sockets stay open and accept bytes, nothing is
    /// answered, as in a long stall. [`RedisServer::resume`] thaws it.
    pub fn pause(&self) {
        self.signal("-STOP");
    }

    /// Thaws a paused server (SIGCONT): it answers everything it received meanwhile.
    pub fn resume(&self) {
        self.signal("-CONT");
    }

    fn signal(&self, signal: &str) {
        let pid = self.child.as_ref().expect("redis-server is running").id();
        let status = Command::new("kill").arg(signal).arg(pid.to_string()).status().expect("kill runs");
        assert!(status.success(), "kill {signal} {pid} failed");
    }

    /// Stops the server (SIGKILL) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again on the same port and directory (data survives if persistence is on).
    pub fn restart(&mut self) {
        self.stop();
        let (port, tls_port) = (self.port, self.tls_port);
        let restarted = try_wait_for_blocking(Duration::from_secs(10), Duration::from_millis(100), || {
            self.spawn(port, tls_port).map_or_else(Look::NotYet, Look::Done)
        });
        if let Err(e) = restarted {
            panic!("redis-server did not restart on port {port}: {e}\n{}", self.log());
        }
    }

    fn spawn_on_free_port(&mut self) {
        let mut last = String::new();
        // Another process may take the port between our probe and redis binding it: retry.
        for _ in 0..5 {
            let free = || TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            let port = free();
            let tls_port = if self.tls.is_empty() { 0 } else { free() };
            match self.spawn(port, tls_port) {
                Ok(()) => return,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}\n{}", self.log());
    }

    fn spawn(&mut self, port: u16, tls_port: u16) -> Result<(), String> {
        let binary: PathBuf =
            std::env::var_os("MCPGATE_REDIS_SERVER").map_or_else(|| "redis-server".into(), PathBuf::from);
        let mut cmd = Command::new(&binary);
        cmd.arg("--port")
            .arg(port.to_string())
            .args(["--bind", "127.0.0.1", "--protected-mode", "no", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .arg("--logfile")
            .arg(self.dir.path().join("redis.log"))
            .args(&self.extra)
            .args(if tls_port == 0 { Vec::new() } else { vec!["--tls-port".to_owned(), tls_port.to_string()] })
            .args(&self.tls)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot run {}: {e}. Install the Debian package redis-server (./scripts/test does) or set MCPGATE_REDIS_SERVER",
                binary.display()
            )
        })?;
        answering(&mut child, port, "redis-server")?;
        self.child = Some(child);
        self.port = port;
        self.tls_port = tls_port;
        Ok(())
    }
}

/// Waits (up to 10 s) until the process `child`, listening on `port`, answers `PING`; kills it
/// and says why when it exits first or stays silent.
pub(super) fn answering(child: &mut Child, port: u16, what: &str) -> Result<(), String> {
    let answered = try_wait_for_blocking(Duration::from_secs(10), Duration::from_millis(20), || {
        if ping(port) {
            return Look::Done(Ok(()));
        }
        match child.try_wait() {
            Ok(Some(status)) => Look::Done(Err(format!("{what} exited with {status}"))),
            _ => Look::NotYet("no PONG".to_owned()),
        }
    });
    answered.unwrap_or_else(|_| {
        let _ = child.kill();
        let _ = child.wait();
        Err(format!("{what} did not answer PING within 10 s"))
    })
}

pub(super) fn ping(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(200)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 7];
    stream.read_exact(&mut buf).is_ok() && &buf == b"+PONG\r\n"
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}
