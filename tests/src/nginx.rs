//! A real `nginx` load balancer on an ephemeral loopback port: plain round robin over the
//! replicas with the deployed proxy settings (`deploy/nginx/mcpgate-proxy.conf`: no
//! affinity, buffering off so SSE streams through, long read timeouts for blocking
//! `tasks/result`). Config, pid and logs live in its temp dir; killed on drop.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use tokio::time::Instant;

/// A running nginx.
#[derive(Debug)]
pub struct Nginx {
    child: Child,
    port: u16,
    dir: tempfile::TempDir,
}

/// The nginx binary: `MCPGATE_NGINX` or `nginx` on `PATH` (Debian installs it in /usr/sbin).
fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("MCPGATE_NGINX") {
        return PathBuf::from(path);
    }
    let sbin = PathBuf::from("/usr/sbin/nginx");
    if sbin.exists() { sbin } else { PathBuf::from("nginx") }
}

impl Nginx {
    /// Starts nginx in front of `upstreams` (`host:port` each).
    pub fn start(upstreams: &[String]) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir().context("temp dir for nginx")?;
        let mut last = String::new();
        // The port may be taken between our probe and nginx binding it: retry.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            std::fs::write(dir.path().join("nginx.conf"), config(dir.path(), port, upstreams))?;
            let mut child = Command::new(binary())
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(|| {
                    format!(
                        "cannot run {}: install the Debian package nginx-light (./scripts/test does) or set MCPGATE_NGINX",
                        binary().display()
                    )
                })?;
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return Ok(Self { child, port, dir });
                }
                if let Ok(Some(status)) = child.try_wait() {
                    last = format!(
                        "nginx exited with {status}: {}",
                        std::fs::read_to_string(dir.path().join("error.log")).unwrap_or_default()
                    );
                    break;
                }
                if Instant::now() > deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    bail!("nginx did not listen within 10 s");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        bail!("nginx did not start: {last}")
    }

    /// `host:port` of the load balancer.
    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The error log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("error.log")).unwrap_or_default()
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn config(dir: &std::path::Path, port: u16, upstreams: &[String]) -> String {
    let d = dir.display();
    let servers: String = upstreams.iter().map(|u| format!("        server {u};\n")).collect();
    // The proxy settings are the deployed ones (deploy/nginx/mcpgate-proxy.conf).
    let proxy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/nginx/mcpgate-proxy.conf");
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    upstream mcpgate {{
{servers}        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 8m;
        location / {{
            include {proxy};
        }}
    }}
}}
"#
    )
}
