//! stdio upstreams: one child process per replica, exec'd without a shell, with only the
//! configured environment (plus `PATH` and `HOME`); newline-delimited JSON-RPC on its stdin and
//! stdout, requests multiplexed by id; stderr logged under the upstream's name.
//!
//! Invariants: a message from the child larger than `max_message_bytes` is never buffered
//! whole (the call it answers fails, the rest of the line is skipped); a child that exits
//! fails every call in flight on it with a clear error and is started again on the next call,
//! no sooner than its backoff allows; a call that is dropped (timeout, cancellation) removes
//! its pending entry and tells the child with `notifications/cancelled`; the child dies with
//! the replica (killed on drop, and its stdin closes); a child slow to start is not taken for
//! a legacy server because it answered `server/discover` late (see `negotiate`).

use std::process::Stdio as Piped;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;
use serde_json::value::RawValue;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::mux::Mux;
use super::{Exchange, Signals};
use crate::config::{EraChoice, UpstreamConfig};
use crate::error::{UpstreamError, cause};
use crate::rpc::{self, Negotiated};

const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A child that ran this long before exiting restarts with the first backoff again.
const STABLE_RUN: Duration = Duration::from_secs(30);
/// How long `auto` waits for an answer to `server/discover` before trying `initialize`.
const DISCOVER_WAIT: Duration = Duration::from_secs(2);
/// Longest stderr line logged.
const MAX_STDERR_LINE: usize = 4096;

/// A running child.
struct Child {
    /// The JSON-RPC connection over its pipes (closed when the child is gone).
    mux: Arc<Mux>,
    negotiated: Negotiated,
    started: Instant,
}

enum State {
    /// No child; the next may start at `next_start`.
    Idle {
        next_start: Instant,
        backoff: Duration,
        last_error: Option<String>,
        ever_started: bool,
    },
    Running(Arc<Child>),
}

/// A stdio upstream.
pub(crate) struct Stdio {
    config: Arc<UpstreamConfig>,
    signals: Arc<Signals>,
    state: tokio::sync::Mutex<State>,
    /// Cancelled on shutdown: kills the child.
    stop: CancellationToken,
}

impl std::fmt::Debug for Stdio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stdio").field("upstream", &self.config.name).finish_non_exhaustive()
    }
}

impl Stdio {
    pub(crate) fn new(config: Arc<UpstreamConfig>, signals: Arc<Signals>) -> Self {
        Self {
            config,
            signals,
            state: tokio::sync::Mutex::new(State::Idle {
                next_start: Instant::now(),
                backoff: FIRST_BACKOFF,
                last_error: None,
                ever_started: false,
            }),
            stop: CancellationToken::new(),
        }
    }

    pub(crate) fn shutdown(&self) {
        self.stop.cancel();
    }

    pub(crate) async fn exchange(&self, ex: Exchange) -> Result<Box<RawValue>, UpstreamError> {
        let child = self.child().await?;
        child.mux.request(ex, &child.negotiated).await
    }

    /// Writes a message that expects no answer to the running child.
    pub(crate) async fn send_only(&self, bytes: Vec<u8>) -> Result<(), UpstreamError> {
        self.child().await?.mux.notify(bytes).await;
        Ok(())
    }

    /// The running child, starting one (and its handshake) when there is none and the backoff
    /// allows.
    async fn child(&self) -> Result<Arc<Child>, UpstreamError> {
        let mut state = self.state.lock().await;
        if let State::Running(child) = &*state {
            if !child.mux.closed().is_cancelled() {
                return Ok(child.clone());
            }
            let reason = child.mux.reason();
            let backoff = if child.started.elapsed() >= STABLE_RUN { FIRST_BACKOFF } else { FIRST_BACKOFF * 2 };
            *state = State::Idle {
                next_start: child.started.max(Instant::now() - backoff) + backoff,
                backoff,
                last_error: Some(reason),
                ever_started: true,
            };
        }
        let State::Idle { next_start, backoff, last_error, ever_started } = &*state else {
            unreachable!("a running child was returned above")
        };
        let now = Instant::now();
        if now < *next_start {
            return Err(UpstreamError::unreachable(format!(
                "the server process is restarting (in {} ms) after: {}",
                (*next_start - now).as_millis(),
                last_error.as_deref().unwrap_or("a failure")
            )));
        }
        let (backoff, ever_started) = (*backoff, *ever_started);
        match tokio::time::timeout(self.config.connect_timeout(), self.start()).await {
            Ok(Ok(child)) => {
                if ever_started {
                    self.signals.restarts.fetch_add(1, Ordering::Relaxed);
                }
                let child = Arc::new(child);
                *state = State::Running(child.clone());
                Ok(child)
            }
            outcome => {
                let error = match outcome {
                    Ok(Err(e)) => e,
                    _ => UpstreamError::unreachable(format!(
                        "the server did not start within {} s",
                        self.config.connect_timeout_secs
                    )),
                };
                tracing::warn!(upstream = %self.config.name, error = &error as &dyn std::error::Error, "starting the upstream server failed");
                *state = State::Idle {
                    next_start: Instant::now() + backoff,
                    backoff: (backoff * 2).min(MAX_BACKOFF),
                    last_error: Some(error.client_text()),
                    ever_started: true,
                };
                Err(error)
            }
        }
    }

    /// Spawns the process, wires its pipes, and negotiates the era.
    async fn start(&self) -> Result<Child, UpstreamError> {
        let config = &self.config;
        let program = config.command.as_deref().unwrap_or_default();
        let mut command = tokio::process::Command::new(program);
        command.args(&config.args).env_clear();
        for var in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(var) {
                command.env(var, value);
            }
        }
        command.envs(&config.env);
        if let Some(cwd) = &config.cwd {
            command.current_dir(cwd);
        }
        command.stdin(Piped::piped()).stdout(Piped::piped()).stderr(Piped::piped()).kill_on_drop(true);
        let mut process = command.spawn().map_err(|e| UpstreamError::Unreachable {
            detail: Some(format!("cannot start {program:?}")),
            source: Some(cause(e)),
        })?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (process.stdin.take(), process.stdout.take(), process.stderr.take())
        else {
            return Err(UpstreamError::unreachable("the process has no pipes"));
        };
        let name = config.name.clone();
        let (writer, mut outbox) = mpsc::channel::<Vec<u8>>(256);
        let mux = Mux::new(writer, self.signals.clone(), &name);

        // Writer: one line per message.
        let writer_mux = mux.clone();
        tokio::spawn(async move {
            let closed = writer_mux.closed().clone();
            while let Some(mut line) = tokio::select! { m = outbox.recv() => m, () = closed.cancelled() => None } {
                line.push(b'\n');
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    writer_mux.close("writing to the server failed".to_owned());
                    break;
                }
            }
        });

        // stderr: logged line by line, bounded.
        let stderr_name = name.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr);
            let mut line = Vec::new();
            loop {
                line.clear();
                match read_line(&mut reader, &mut line, MAX_STDERR_LINE).await {
                    Ok(Line::Eof) | Err(_) => break,
                    Ok(Line::Complete | Line::TooLong) => {
                        let text = String::from_utf8_lossy(&line);
                        let text = text.trim_end();
                        if !text.is_empty() {
                            tracing::info!(upstream = %stderr_name, "stderr: {text}");
                        }
                    }
                }
            }
        });

        // Reader: every line to the connection.
        let max = usize::try_from(config.max_message_bytes).unwrap_or(usize::MAX);
        let reader_mux = mux.clone();
        tokio::spawn(async move {
            let closed = reader_mux.closed().clone();
            let mut reader = BufReader::new(stdout);
            let mut line = Vec::new();
            let why = loop {
                line.clear();
                let read = tokio::select! {
                    r = read_line(&mut reader, &mut line, max) => r,
                    () = closed.cancelled() => return,
                };
                match read {
                    Ok(Line::Eof) => break "the server closed its output".to_owned(),
                    Err(e) => break format!("reading its output failed: {e}"),
                    Ok(Line::TooLong) => reader_mux.too_large(&line, max),
                    Ok(Line::Complete) => reader_mux.dispatch(&line),
                }
            };
            reader_mux.close(why);
        });

        // Reaper: the process's exit closes the connection; a close (or shutdown) kills it.
        let (reaper_mux, stop) = (mux.clone(), self.stop.clone());
        tokio::spawn(async move {
            let closed = reaper_mux.closed().clone();
            let why = tokio::select! {
                status = process.wait() => match status {
                    Ok(s) => format!("the server process exited ({s})"),
                    Err(e) => format!("waiting for the server process failed: {e}"),
                },
                () = closed.cancelled() => reaper_mux.reason(),
                () = stop.cancelled() => "the gateway is shutting down".to_owned(),
            };
            let _ = process.start_kill();
            let _ = tokio::time::timeout(Duration::from_secs(5), process.wait()).await;
            let stranded = reaper_mux.in_flight();
            reaper_mux.close(why.clone());
            if stranded > 0 || !stop.is_cancelled() {
                tracing::warn!(upstream = %name, calls = stranded, "upstream server gone: {why}");
            }
        });

        // Until the handshake succeeds, a failure or a dropped start (connect timeout) kills it.
        let abort = mux.closed().clone().drop_guard();
        let mut child = Child {
            mux,
            negotiated: Negotiated::Legacy { version: config.era.legacy_version().to_owned() },
            started: Instant::now(),
        };
        child.negotiated = negotiate(&self.config, self.config.era, &child.mux).await?;
        abort.disarm();
        tracing::info!(upstream = %self.config.name, version = child.negotiated.version(), "upstream server started");
        Ok(child)
    }
}

/// `server/discover` (modern) or `initialize` + `notifications/initialized` (legacy), as
/// `era` says, over a multiplexed connection; `auto` takes any error answer to
/// `server/discover` (or none within a moment: some legacy servers never answer a request
/// before `initialize`) as "legacy". A discover left unanswered may only have come early: a
/// server slow to start (a first `npx -y` download, a cold interpreter) reads it late, serves
/// 2026-07-28 from then on and refuses the `initialize` that followed on the same connection
/// (-32022); so an error answer to `initialize` after an unanswered discover asks
/// `server/discover` once more, now that the server answers. The whole start is bounded by
/// the caller (`connect_timeout_secs`).
pub(super) async fn negotiate(config: &UpstreamConfig, era: EraChoice, mux: &Mux) -> Result<Negotiated, UpstreamError> {
    let mut unanswered = false;
    if matches!(era, EraChoice::Auto | EraChoice::V2026_07_28) {
        let wait = (config.connect_timeout() / 2).min(DISCOVER_WAIT);
        let answer = tokio::time::timeout(wait, mux.request(discover(), &Negotiated::Modern))
            .await
            .unwrap_or(Err(UpstreamError::Timeout { secs: wait.as_secs() }));
        match answer {
            Ok(result) if rpc::discover_offers_modern(&result) => return Ok(Negotiated::Modern),
            Err(UpstreamError::Timeout { .. }) if era == EraChoice::Auto => unanswered = true,
            Ok(_) | Err(UpstreamError::Rpc { .. }) if era == EraChoice::Auto => {}
            Ok(_) => return Err(UpstreamError::protocol("the server does not offer 2026-07-28")),
            Err(e) => return Err(e),
        }
    }
    let version = era.legacy_version();
    let init = Exchange {
        method: "initialize",
        params: rpc::initialize_params(version),
        name: None,
        param_headers: Vec::new(),
        bearer: None,
        progress: None,
        questions: None,
        holder: None,
    };
    let opening = Negotiated::Legacy { version: version.to_owned() };
    let result = match mux.request(init, &opening).await {
        Err(refused @ UpstreamError::Rpc { .. }) if unanswered => {
            return match mux.request(discover(), &Negotiated::Modern).await {
                Ok(result) if rpc::discover_offers_modern(&result) => Ok(Negotiated::Modern),
                _ => Err(refused),
            };
        }
        answer => answer?,
    };
    let negotiated = rpc::negotiated_from_initialize(&result)?;
    mux.notify(rpc::notification("notifications/initialized", json!({}))).await;
    Ok(negotiated)
}

fn discover() -> Exchange {
    Exchange {
        method: "server/discover",
        params: json!({}),
        name: None,
        param_headers: Vec::new(),
        bearer: None,
        progress: None,
        questions: None,
        holder: None,
    }
}

pub(crate) enum Line {
    Complete,
    TooLong,
    Eof,
}

/// Reads one line (without its newline) into `buf`, keeping at most `max` bytes: a longer line
/// is consumed to its end and reported `TooLong` with its first bytes in `buf`.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if buf.is_empty() && !too_long {
                Line::Eof
            } else if too_long {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(at) => (&available[..at], Some(at)),
            None => (available, None),
        };
        if !too_long {
            if buf.len() + chunk.len() > max {
                let room = max.saturating_sub(buf.len()).min(512);
                buf.extend_from_slice(&chunk[..room.min(chunk.len())]);
                too_long = true;
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let used = found.map_or(available.len(), |at| at + 1);
        reader.consume(used);
        if found.is_some() {
            return Ok(if too_long { Line::TooLong } else { Line::Complete });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_bounded() {
        let data = b"short\nthis line is far too long for the limit\nok\n".to_vec();
        let mut reader = BufReader::with_capacity(8, &data[..]);
        let mut buf = Vec::new();
        assert!(matches!(read_line(&mut reader, &mut buf, 10).await.unwrap(), Line::Complete));
        assert_eq!(buf, b"short");
        buf.clear();
        assert!(matches!(read_line(&mut reader, &mut buf, 10).await.unwrap(), Line::TooLong));
        assert!(buf.len() <= 10);
        buf.clear();
        assert!(matches!(read_line(&mut reader, &mut buf, 10).await.unwrap(), Line::Complete));
        assert_eq!(buf, b"ok");
        buf.clear();
        assert!(matches!(read_line(&mut reader, &mut buf, 10).await.unwrap(), Line::Eof));
    }
}
