//! A real `nginx` load balancer on an ephemeral loopback port: plain round robin over the
//! replicas with the deployed proxy settings (`deploy/nginx/mcpgate-proxy.conf`: no
//! affinity, buffering off so SSE streams through, long read timeouts for blocking
//! `tasks/result`). Config, pid and logs live in its temp dir; ready once it answers its own
//! probe location; killed on drop. Also an nginx running a shipped config (`start_with`) and
//! `nginx -t` of one (`check_config`).

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use crate::probe;
use crate::wait::{Look, wait_for_blocking};

/// How long nginx may take to answer its probe.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// nginx's own location (never proxied), proving that what answers on the port is this nginx.
const READY_PATH: &str = "/mcpgate-e2e-nginx-ready";

/// What nginx on `port` answers at [`READY_PATH`].
fn ready_marker(port: u16) -> String {
    format!("mcpgate-e2e nginx on {port}")
}

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
    /// Starts nginx in front of `upstreams` (`host:port` each), ready once it answers on its
    /// own probe location.
    ///
    /// # Errors
    ///
    /// When it neither answers nor exits within 30 s.
    pub fn start(upstreams: &[String]) -> anyhow::Result<Self> {
        Self::start_with(|port, ready| servers(port, ready, upstreams))
    }

    /// Starts nginx with the `http` context `http(port, ready)` returns: it must listen on
    /// `127.0.0.1:<port>` and hold the `ready` location in that server. The harness adds the
    /// main context, the temp paths and `access_log off`.
    ///
    /// # Errors
    ///
    /// When it neither answers nor exits within 30 s.
    pub fn start_with(http: impl Fn(u16, &str) -> String) -> anyhow::Result<Self> {
        let mut last = String::new();
        // The port may be taken between our probe and nginx binding it: retry.
        for _ in 0..5 {
            let dir = tempfile::tempdir().context("temp dir for nginx")?;
            let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
            let marker = ready_marker(port);
            let ready = format!("location = {READY_PATH} {{\n            return 200 \"{marker}\";\n        }}\n");
            std::fs::write(dir.path().join("nginx.conf"), main_config(dir.path(), &http(port, &ready)))?;
            let child = Command::new(binary())
                .arg("-p")
                .arg(dir.path())
                .arg("-c")
                .arg(dir.path().join("nginx.conf"))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .with_context(not_installed)?;
            // Owned before waiting, so a failed wait kills it.
            let mut nginx = Self { child, port, dir };
            let request = probe::get(READY_PATH);
            let up = wait_for_blocking(format!("nginx to answer on port {port}"), START_TIMEOUT, || {
                if let Some(status) = nginx.child.try_wait()? {
                    return Ok(Look::Done(Err(format!("nginx exited with {status}: {}", nginx.log()))));
                }
                Ok(match probe::answers(port, &request, &marker) {
                    Look::Done(()) => Look::Done(Ok(())),
                    Look::NotYet(seen) => Look::NotYet(seen),
                })
            });
            match up {
                Ok(()) => return Ok(nginx),
                Err(exited) => last = exited,
            }
        }
        bail!("nginx did not start: {last}")
    }

    /// `nginx -t` of `config` (a whole `nginx.conf`, main context included), run with its own
    /// prefix and error log in a temp dir: Ok, or an error holding what nginx said.
    ///
    /// # Errors
    ///
    /// When nginx cannot run or finds the config wrong.
    pub fn check_config(config: &str) -> anyhow::Result<()> {
        let dir = tempfile::tempdir().context("temp dir for nginx -t")?;
        let path = dir.path().join("nginx.conf");
        std::fs::write(&path, config)?;
        let out = Command::new(binary())
            .arg("-t")
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&path)
            .stdin(Stdio::null())
            .output()
            .with_context(not_installed)?;
        if !out.status.success() {
            bail!("nginx -t failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr));
        }
        Ok(())
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

/// Why nginx could not run.
fn not_installed() -> String {
    format!(
        "cannot run {}: install the Debian package nginx-light (./scripts/test does) or set MCPGATE_NGINX",
        binary().display()
    )
}

/// The whole config: the main context, logs and temp paths in `dir`, and `http` in the `http`
/// context.
fn main_config(dir: &std::path::Path, http: &str) -> String {
    let d = dir.display();
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
{http}}}
"#
    )
}

/// The test load balancer: round robin over `upstreams`.
fn servers(port: u16, ready: &str, upstreams: &[String]) -> String {
    let servers: String = upstreams.iter().map(|u| format!("        server {u};\n")).collect();
    // The proxy settings are the deployed ones (deploy/nginx/mcpgate-proxy.conf).
    let proxy = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/nginx/mcpgate-proxy.conf");
    format!(
        r#"    upstream mcpgate {{
{servers}        keepalive 64;
    }}
    server {{
        listen 127.0.0.1:{port};
        client_max_body_size 8m;
        {ready}
        location / {{
            set $mcpgate_upstream mcpgate;
            include {proxy};
        }}
    }}
"#
    )
}
