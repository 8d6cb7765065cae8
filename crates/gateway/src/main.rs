//! The `mcpgate` binary: load the configuration, start logging, bind, serve until SIGTERM.

use std::io::Write as _;

use anyhow::Context as _;
use base64::Engine as _;

use mcpgate::config::{self, Cli};
use mcpgate::{AppState, shutdown, telemetry};

fn main() -> anyhow::Result<()> {
    let mut cli = Cli::parse_args();
    if let Some(config::Command::Admin(args)) = cli.command.take() {
        return mcpgate::admin::run_command(args);
    }
    if let Some(url) = &cli.probe {
        return mcpgate::probe::probe(url).with_context(|| format!("probe of {url} failed"));
    }
    if cli.generate_seal_key {
        let mut key = [0u8; 32];
        getrandom::fill(&mut key).map_err(|e| anyhow::anyhow!("random number generator: {e}"))?;
        // Named after the second it was made, so rotations sort by age.
        let made = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let kid = format!("k{made}");
        println!("{kid}:{}", base64::engine::general_purpose::STANDARD.encode(key));
        return Ok(());
    }
    let config = config::load(&cli, &|name| std::env::var(name).ok())?;
    // Flushes exported spans when dropped, after the runtime has stopped.
    let _telemetry = telemetry::init(&config.log, &|name| std::env::var(name).ok())?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().context("starting the runtime")?;
    runtime.block_on(run(config))
}

async fn run(config: mcpgate::Config) -> anyhow::Result<()> {
    let listen = config.listen;
    let admin_listen = config.admin.listen;
    let state = AppState::new(config).await?;
    let admin = match admin_listen {
        Some(at) => Some(tokio::net::TcpListener::bind(at).await.with_context(|| format!("binding admin {at}"))?),
        None => None,
    };
    let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| format!("binding {listen}"))?;
    let addr = listener.local_addr().context("reading the bound address")?;
    let mut stdout = std::io::stdout().lock();
    // The admin address first: the MCP one is the line scripts wait for, the last.
    if let Some(admin) = &admin {
        let at = admin.local_addr().context("reading the bound admin address")?;
        writeln!(stdout, "admin listening on http://{at}").context("writing to stdout")?;
    }
    writeln!(stdout, "listening on http://{addr}").context("writing to stdout")?;
    stdout.flush().context("flushing stdout")?;
    drop(stdout);
    tracing::info!(
        %addr,
        toolsets = ?state.config.toolset,
        auth = ?state.config.auth.mode,
        store = state.store.kind(),
        "mcpgate started"
    );
    mcpgate::serve_with_admin(listener, admin, state, shutdown::signal()).await.context("serving")?;
    tracing::info!("mcpgate stopped");
    Ok(())
}
