//! The `mcpgate` binary: load the configuration, start logging, bind, serve until SIGTERM.

use std::io::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;

use anyhow::Context as _;
use base64::Engine as _;

use mcpgate::config::{self, Cli};
use mcpgate::{AppState, shutdown, telemetry};

/// Runs the binary; an error is printed with its causes and ends the process with status 1.
/// It is never printed with a backtrace, whatever `RUST_BACKTRACE` says: it reports what the
/// operator can fix (a setting, a port, an unreachable Redis), not where the code was.
fn main() -> ExitCode {
    match start() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut text = format!("Error: {e}");
            let causes: Vec<String> = e.chain().skip(1).map(ToString::to_string).collect();
            if !causes.is_empty() {
                text.push_str("\n\nCaused by:");
                for (i, cause) in causes.iter().enumerate() {
                    text.push_str(&format!("\n    {i}: {cause}"));
                }
            }
            // Nothing more can be done about a failed write to stderr.
            let _ = writeln!(std::io::stderr().lock(), "{text}");
            ExitCode::FAILURE
        }
    }
}

fn start() -> anyhow::Result<()> {
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
        Some(at) => Some(bind(at, "MCPGATE_ADMIN_LISTEN or `admin.listen` in the config file").await?),
        None => None,
    };
    let listener = bind(listen, "--listen, MCPGATE_LISTEN or `listen` in the config file").await?;
    let addr = listener.local_addr().context("reading the bound address")?;
    // Taken over before the address is announced: whoever reads it may stop us at once.
    let stop = shutdown::signal();
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
        toolsets = ?state.config().toolset,
        auth = ?state.config().auth.mode,
        store = state.store().kind(),
        "mcpgate started"
    );
    mcpgate::serve_with_admin(listener, admin, state, stop).await.context("serving")?;
    tracing::info!("mcpgate stopped");
    Ok(())
}

/// Binds `at`; a port another process holds is said as such, naming `how` to choose another
/// (the flag, the variable, the setting).
async fn bind(at: SocketAddr, how: &str) -> anyhow::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(at).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::AddrInUse {
            anyhow::anyhow!(
                "cannot listen on {at}: the port is taken (another process listens there, perhaps another \
                 mcpgate); choose another address with {how}"
            )
        } else {
            anyhow::Error::new(e).context(format!("cannot listen on {at}"))
        }
    })
}
