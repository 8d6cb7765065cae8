//! A throwaway certificate authority and a server certificate it signed for `127.0.0.1`
//! (and `localhost`), made with the `openssl` CLI in a temp dir that is deleted on drop: what
//! TLS tests give `redis-server` to serve and the store to trust.
//!
//! Invariant: every `openssl` run is bounded in time; a missing or failing `openssl` panics
//! with what to install or what it printed.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use super::wait::{Look, try_wait_for_blocking};

/// How long one `openssl` run may take (key generation included).
const OPENSSL_PATIENCE: Duration = Duration::from_secs(30);

/// A CA and one server certificate it signed, as PEM files.
#[derive(Debug)]
pub struct TestCa {
    dir: tempfile::TempDir,
}

impl TestCa {
    /// Generates the CA (P-256, valid two days) and the server certificate.
    pub fn generate() -> Self {
        let dir = tempfile::tempdir().expect("temp dir for the test CA");
        let at = dir.path();
        openssl(
            at,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
                "-days",
                "2",
                "-subj",
                "/CN=mcpgate test CA",
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
        openssl(
            at,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
                "-subj",
                "/CN=127.0.0.1",
            ],
        );
        std::fs::write(
            at.join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=critical,CA:FALSE\n\
             keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write the server certificate's extensions");
        openssl(
            at,
            &[
                "x509",
                "-req",
                "-in",
                "server.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                "server.pem",
                "-days",
                "2",
                "-extfile",
                "server.ext",
            ],
        );
        Self { dir }
    }

    /// The CA certificate's file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// The CA certificate (PEM), as the store is given it.
    pub fn ca_pem(&self) -> Vec<u8> {
        std::fs::read(self.ca_file()).expect("read the test CA")
    }

    /// The server certificate's file (signed by the CA, for `127.0.0.1` and `localhost`).
    pub fn server_cert_file(&self) -> PathBuf {
        self.dir.path().join("server.pem")
    }

    /// The server certificate's private key file.
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.path().join("server.key")
    }
}

/// Runs `openssl args` in `dir`, killed if it takes longer than [`OPENSSL_PATIENCE`].
fn openssl(dir: &Path, args: &[&str]) {
    let mut child = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run openssl: {e}. Install the Debian package openssl"));
    let finished = try_wait_for_blocking(OPENSSL_PATIENCE, Duration::from_millis(20), || {
        child.try_wait().expect("wait for openssl").map_or_else(|| Look::NotYet("still running".to_owned()), Look::Done)
    });
    match finished {
        Ok(status) if status.success() => {}
        Ok(status) => {
            let mut err = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                let _ = std::io::Read::read_to_string(&mut stderr, &mut err);
            }
            panic!("openssl {} failed ({status}): {err}", args.join(" "));
        }
        Err(_) => {
            let _ = child.kill();
            let _ = child.wait();
            panic!("openssl {} did not finish within {OPENSSL_PATIENCE:?}", args.join(" "));
        }
    }
}
