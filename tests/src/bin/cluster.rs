//! `mcpgate-cluster`: starts Redis, N replicas and nginx on loopback for scripts (the test
//! command runs the conformance suite against it; scripts/bench loads it), prints
//! `redis <url>`, `replica <url> <pid>` for each replica and, last, `lb <url>`, and tears everything
//! down when stdin closes or on SIGTERM/SIGINT, writing every replica's log and nginx's to
//! stderr.

use std::io::{BufRead as _, Write as _};

use anyhow::Context as _;

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mut replicas = 3;
    let mut gateway_args: Vec<String> = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--replicas" => replicas = args.next().context("--replicas needs a number")?.parse()?,
            "--" => gateway_args.extend(args.by_ref()),
            other => {
                anyhow::bail!("unknown argument {other:?} (usage: mcpgate-cluster [--replicas N] [-- gateway args])")
            }
        }
    }
    let gateway_args: Vec<&str> = gateway_args.iter().map(String::as_str).collect();
    let cluster = mcpgate_e2e::Cluster::builder(replicas).args(&gateway_args).start()?;
    let mut out = std::io::stdout().lock();
    if let Some((_, redis)) = cluster.env().iter().find(|(k, _)| k == "MCPGATE_REDIS_URL") {
        writeln!(out, "redis {redis}")?;
    }
    for i in 0..replicas {
        writeln!(out, "replica {} {}", cluster.replica_url(i), cluster.replica(i).pid())?;
    }
    writeln!(out, "lb {}", cluster.url())?;
    out.flush()?;
    drop(out);
    // Run until whoever started us closes our stdin, or sends SIGTERM/SIGINT: either way the
    // cluster is dropped (every process it started killed) before we exit.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let waited = runtime.block_on(async {
        let stdin_closed = tokio::task::spawn_blocking(|| {
            for line in std::io::stdin().lock().lines() {
                if line.is_err() {
                    break;
                }
            }
        });
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        tokio::select! {
            _ = stdin_closed => {}
            _ = term.recv() => {}
            _ = tokio::signal::ctrl_c() => {}
        }
        anyhow::Ok(())
    });
    // The stdin reader may still be blocked in read(): do not wait for it.
    runtime.shutdown_background();
    waited?;
    // The replicas' and nginx's logs go to our stderr, for the caller to keep or show.
    let mut err = std::io::stderr().lock();
    for (i, replica) in cluster.replicas.iter().enumerate() {
        if let Some(replica) = replica {
            writeln!(err, "--- replica {i} ({}) ---\n{}", replica.addr(), replica.logs())?;
        }
    }
    writeln!(err, "--- nginx ---\n{}", cluster.nginx_log())?;
    drop(err);
    drop(cluster);
    Ok(())
}
