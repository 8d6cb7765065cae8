//! docs/clients.md's snippets run for real (docs/clients/*): the official MCP Python SDK and
//! TypeScript SDK (v1 and v2) clients in the eras each speaks, and the raw 2026-07-28 task
//! exchange (curl and jq), each against a gateway that requires a JWT. Each runs with the token
//! (it works) and without it (it fails: so its success is its token's doing). The SDKs are the
//! pinned ones the test command installs under `.cache/test-tools` (or where
//! `MCPGATE_TEST_MCP_PYTHON` and `MCPGATE_TEST_CLIENTS_DIR` say); a missing one fails the test
//! saying how to install it. The doc quotes every snippet file verbatim.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::Value;

use mcpgate_e2e::{Gateway, Look, wait_for_blocking};

use crate::jwt::{bearer, gateway_with_jwt};

/// How long a snippet may run (Python and Node start slowly on a busy machine; the task takes
/// 2 s).
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

fn root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

fn snippet(name: &str) -> PathBuf {
    root().join("docs/clients").join(name)
}

/// The Python of the venv holding the `mcp` SDK (made by scripts/test).
fn mcp_python() -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("MCPGATE_TEST_MCP_PYTHON")
        .map_or_else(|| root().join(".cache/test-tools/mcp-venv/bin/python"), PathBuf::from);
    if !path.is_file() {
        bail!("{} not found: run scripts/test (it installs mcp) or set MCPGATE_TEST_MCP_PYTHON", path.display());
    }
    Ok(path)
}

/// The directory whose node_modules holds the TypeScript SDKs (made by scripts/test).
fn clients_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os("MCPGATE_TEST_CLIENTS_DIR")
        .map_or_else(|| root().join(".cache/test-tools/clients"), PathBuf::from);
    for package in ["@modelcontextprotocol/sdk", "@modelcontextprotocol/client"] {
        if !dir.join("node_modules").join(package).join("package.json").is_file() {
            bail!(
                "{package} not found under {}: run scripts/test (it installs the TypeScript SDKs) or set \
                 MCPGATE_TEST_CLIENTS_DIR",
                dir.display()
            );
        }
    }
    Ok(dir)
}

/// The Node.js the test command installs when the system's is older than 22, else the system's.
fn node() -> PathBuf {
    let installed = root().join(".cache/test-tools/node_modules/.bin/node");
    if installed.is_file() { installed } else { PathBuf::from("node") }
}

/// What a finished snippet printed.
struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs `program args` with only PATH, HOME and the snippet's variables (`MCPGATE_URL`, and
/// `MCPGATE_TOKEN` when given), to its end (bounded; killed if it overruns).
fn run(program: &Path, args: &[&Path], url: &str, token: Option<&str>) -> anyhow::Result<Ran> {
    let out = tempfile::tempdir()?;
    let (stdout, stderr) = (out.path().join("stdout"), out.path().join("stderr"));
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", std::env::var_os("HOME").unwrap_or_else(|| out.path().into()))
        .env("MCPGATE_URL", url)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout)?)
        .stderr(std::fs::File::create(&stderr)?);
    if let Some(token) = token {
        cmd.env("MCPGATE_TOKEN", token);
    }
    let mut child = Running(cmd.spawn().with_context(|| format!("cannot run {}", program.display()))?);
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    let status = wait_for_blocking(format!("{args:?} to finish"), RUN_TIMEOUT, || {
        Ok(match child.0.try_wait()? {
            Some(status) => Look::Done(status),
            None => Look::NotYet(format!("stdout: {}\nstderr: {}", read(&stdout), read(&stderr))),
        })
    });
    Ok(Ran { status, stdout: read(&stdout), stderr: read(&stderr) })
}

/// A snippet's process, killed and reaped if the test gives up on it (a panicking wait).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A gateway (demo toolset) that requires a JWT, and a token for it.
fn gateway() -> anyhow::Result<(Gateway, String)> {
    let gateway = gateway_with_jwt(Gateway::builder()).start()?;
    let token = bearer("alice")?.strip_prefix("Bearer ").context("a bearer header")?.to_owned();
    Ok((gateway, token))
}

/// Runs a snippet with the token (it must succeed and print every one of `expect`) and without
/// (it must fail); returns what the first run printed.
fn works_with_the_token_only(program: &Path, args: &[&Path], expect: &[&str]) -> anyhow::Result<String> {
    let (gateway, token) = gateway()?;
    let with = run(program, args, &gateway.url(), Some(&token))?;
    assert!(
        with.status.success(),
        "{args:?} failed ({}):\n{}\n{}\n{}",
        with.status,
        with.stdout,
        with.stderr,
        gateway.logs()
    );
    for line in expect {
        assert!(with.stdout.contains(line), "{args:?} did not print {line:?}:\n{}", with.stdout);
    }
    let without = run(program, args, &gateway.url(), None)?;
    assert!(!without.status.success(), "{args:?} worked without a token:\n{}", without.stdout);
    Ok(with.stdout)
}

/// A copy of a .mjs snippet inside the SDKs' directory, where Node resolves its imports.
fn in_clients_dir(name: &str) -> anyhow::Result<(tempfile::TempDir, PathBuf)> {
    let dir = tempfile::tempdir_in(clients_dir()?)?;
    let copy = dir.path().join(name);
    std::fs::copy(snippet(name), &copy)?;
    Ok((dir, copy))
}

#[test]
fn the_python_sdk_snippet_calls_in_both_eras_with_a_bearer_token() -> anyhow::Result<()> {
    let expect = ["2025-11-25: ", "2026-07-28: ", "tools; echo said hello"];
    let printed = works_with_the_token_only(&mcp_python()?, &[&snippet("python_client.py")], &expect)?;
    assert_eq!(printed.matches("echo said hello").count(), 2, "{printed}");
    Ok(())
}

#[test]
fn the_typescript_sdk_v1_snippet_calls_with_a_bearer_token() -> anyhow::Result<()> {
    let (_dir, copy) = in_clients_dir("typescript_sdk_v1.mjs")?;
    works_with_the_token_only(&node(), &[&copy], &["2025-11-25: ", "tools; echo said hello"])?;
    Ok(())
}

#[test]
fn the_typescript_sdk_v2_snippet_calls_in_both_eras_with_a_bearer_token() -> anyhow::Result<()> {
    let (_dir, copy) = in_clients_dir("typescript_sdk_v2.mjs")?;
    let expect = ["2025-11-25: ", "2026-07-28: ", "tools; echo said hello"];
    let printed = works_with_the_token_only(&node(), &[&copy], &expect)?;
    assert_eq!(printed.matches("echo said hello").count(), 2, "{printed}");
    Ok(())
}

#[test]
fn the_curl_snippet_gets_a_task_and_polls_tasks_get_until_it_completes() -> anyhow::Result<()> {
    for tool in ["curl", "jq"] {
        let found = Command::new(tool).arg("--version").stdout(Stdio::null()).stderr(Stdio::null()).status();
        assert!(found.is_ok_and(|s| s.success()), "{tool} not found: install it (scripts/test installs jq)");
    }
    let printed = works_with_the_token_only(Path::new("bash"), &[&snippet("tasks.sh")], &[])?;
    let replies: Vec<Value> = printed.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    let [created, done] = replies.as_slice() else { panic!("two replies expected:\n{printed}") };
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    assert_eq!(created["result"]["status"], "working", "{created}");
    assert_eq!(done["result"]["taskId"], created["result"]["taskId"], "{done}");
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert!(done["result"]["result"]["content"][0]["text"].is_string(), "the result inline: {done}");
    Ok(())
}

#[test]
fn the_client_doc_quotes_every_snippet_verbatim() -> anyhow::Result<()> {
    let doc = std::fs::read_to_string(root().join("docs/clients.md"))?;
    let mut quoted = 0;
    for entry in std::fs::read_dir(root().join("docs/clients"))? {
        let path = entry?.path();
        let lang = match path.extension().and_then(|e| e.to_str()) {
            Some("py") => "python",
            Some("mjs") => "js",
            Some("sh") => "sh",
            other => bail!("{}: a snippet of an unknown kind ({other:?})", path.display()),
        };
        let text = std::fs::read_to_string(&path)?;
        let name = path.file_name().and_then(|n| n.to_str()).context("a file name")?;
        assert!(doc.contains(&format!("```{lang}\n{text}```\n")), "docs/clients.md does not quote {name} verbatim");
        assert!(doc.contains(&format!("](clients/{name})")), "docs/clients.md does not link {name}");
        quoted += 1;
    }
    assert_eq!(quoted, 4, "every snippet quoted");
    Ok(())
}
