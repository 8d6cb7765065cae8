//! A real `redis-server` on an ephemeral loopback port, in its own temp dir, killed (and
//! reaped) when dropped. The binary is `MCPGATE_REDIS_SERVER` or `redis-server` on `PATH`.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

/// A running `redis-server`.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl RedisServer {
    /// Starts a server with persistence off.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra arguments (e.g. `["--appendonly", "yes"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir for redis-server");
        let mut server = Self { child: None, port: 0, dir, extra: extra.iter().map(|s| (*s).to_owned()).collect() };
        server.spawn_on_free_port();
        server
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
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
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            match self.spawn(self.port) {
                Ok(()) => return,
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(100));
                }
                Err(e) => panic!("redis-server did not restart on port {}: {e}\n{}", self.port, self.log()),
            }
        }
    }

    fn spawn_on_free_port(&mut self) {
        let mut last = String::new();
        // Another process may take the port between our probe and redis binding it: retry.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
            match self.spawn(port) {
                Ok(()) => return,
                Err(e) => last = e,
            }
        }
        panic!("redis-server did not start: {last}\n{}", self.log());
    }

    fn spawn(&mut self, port: u16) -> Result<(), String> {
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
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().map_err(|e| {
            format!(
                "cannot run {}: {e}. Install the Debian package redis-server (./scripts/test does) or set MCPGATE_REDIS_SERVER",
                binary.display()
            )
        })?;
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if ping(port) {
                self.child = Some(child);
                self.port = port;
                return Ok(());
            }
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("redis-server exited with {status}"));
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err("redis-server did not answer PING within 10 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
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
