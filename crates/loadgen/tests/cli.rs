//! The command line of `mcpgate-loadgen`: usage errors, and failures reported and counted
//! against a port where nothing listens. (Runs against a real gateway are in the e2e tests.)

use std::process::Command;

fn loadgen(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcpgate-loadgen")).args(args).output().expect("runs")
}

#[test]
fn bad_usage_is_exit_code_2_with_a_message() {
    let out = loadgen(&["--url", "http://127.0.0.1:9/mcp", "--mix", "sync=1,bogus=2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown scenario \"bogus\""));
    let out = loadgen(&["--url", "ftp://x", "--mix", "sync=1"]);
    assert_eq!(out.status.code(), Some(2));
    let out = loadgen(&["--url", "http://127.0.0.1:9/mcp", "--run-ledger-tool", "ledger"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs --counted-tool"));
    let out = loadgen(&["--url", "http://127.0.0.1:9/mcp", "--run-tag", "a-b"]);
    assert_eq!(out.status.code(), Some(2), "a tag with the keys' separator would make keys ambiguous");
}

#[test]
fn failures_are_reported_by_kind() {
    // Nothing listens on a freshly freed port.
    let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let dir = tempfile_dir();
    let json = format!("{dir}/report.json");
    let out = loadgen(&[
        "--url",
        &url,
        "--flows",
        "5",
        "--clients",
        "2",
        "--mix",
        "sync=1",
        "--quiet",
        "--report-json",
        &json,
    ]);
    assert_eq!(out.status.code(), Some(0), "failed calls alone are not lost results");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| transport | 5 |"), "{stdout}");
    let report: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).expect("report")).expect("JSON");
    assert_eq!(report["flows_failed"], 5);
    assert_eq!(report["integrity_failures"], 0);
    let out = loadgen(&["--url", &url, "--flows", "2", "--mix", "sync=1", "--quiet", "--max-failures", "0"]);
    assert_eq!(out.status.code(), Some(2), "--max-failures turns failures into a failing exit code");
}

fn tempfile_dir() -> String {
    let dir = std::env::temp_dir().join(format!("loadgen-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.display().to_string()
}
