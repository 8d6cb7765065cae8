//! The audit writer: a bounded queue of finished lines and one OS thread that writes them to
//! the sink (stdout or a file), flushing whenever the queue runs empty.
//!
//! Invariants: handing a line over never blocks and never fails the request or transition it
//! describes: when the queue is full (the sink is slower than the traffic) the line is dropped
//! and counted in `mcpgate_audit_dropped_total`; lines are written whole, in the order they
//! were handed over; the thread ends, after a last flush, once every handle is gone.

use std::io::{BufWriter, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::mpsc::{self, error::TrySendError};

/// Lines queued at once; past it new lines are dropped (and counted).
pub(super) const QUEUE_LINES: usize = 8_192;

/// What the writer thread is handed.
enum Item {
    /// One line, newline included.
    Line(Vec<u8>),
    /// Flush everything before this, then say so.
    Flush(std::sync::mpsc::SyncSender<()>),
}

/// The handle that queues lines for the writer thread.
#[derive(Debug)]
pub(super) struct Writer {
    queue: mpsc::Sender<Item>,
    dropped: Arc<AtomicU64>,
    write_failures: Arc<AtomicU64>,
}

impl std::fmt::Debug for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Line(_) => "Line",
            Self::Flush(_) => "Flush",
        })
    }
}

impl Writer {
    /// Starts the writer thread over `sink`.
    pub(super) fn start(sink: Box<dyn Write + Send>, capacity: usize) -> std::io::Result<Self> {
        let (queue, rx) = mpsc::channel(capacity.max(1));
        let write_failures = Arc::new(AtomicU64::new(0));
        let failures = write_failures.clone();
        std::thread::Builder::new().name("mcpgate-audit".to_owned()).spawn(move || write_loop(sink, rx, &failures))?;
        Ok(Self { queue, dropped: Arc::new(AtomicU64::new(0)), write_failures })
    }

    /// Queues `line` (which ends with a newline), or drops and counts it when the queue is full.
    pub(super) fn send(&self, line: Vec<u8>) {
        match self.queue.try_send(Item::Line(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Closed(_)) => {
                // The first drop of a run is logged; the counter tells the rest.
                if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::warn!("audit queue full: audit lines are being dropped (mcpgate_audit_dropped_total)");
                }
            }
        }
    }

    /// Waits, at most `timeout`, until every line queued so far is written and flushed.
    pub(super) async fn flush(&self, timeout: Duration) -> bool {
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel(1);
        let queued = tokio::time::timeout(timeout, self.queue.send(Item::Flush(done_tx))).await;
        if !matches!(queued, Ok(Ok(()))) {
            return false;
        }
        // The writer is an OS thread: wait for it off the async workers.
        tokio::task::spawn_blocking(move || done_rx.recv_timeout(timeout).is_ok()).await.unwrap_or(false)
    }

    /// Lines dropped because the queue was full.
    pub(super) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Batches the sink refused (an I/O error; their lines are lost).
    pub(super) fn write_failures(&self) -> u64 {
        self.write_failures.load(Ordering::Relaxed)
    }
}

fn write_loop(sink: Box<dyn Write + Send>, mut rx: mpsc::Receiver<Item>, failures: &AtomicU64) {
    let mut out = BufWriter::with_capacity(64 * 1024, sink);
    let mut failing = false;
    while let Some(first) = rx.blocking_recv() {
        let mut acks = Vec::new();
        let mut result = Ok(());
        let mut item = Some(first);
        // Everything queued meanwhile goes out in the same batch, then one flush.
        while let Some(next) = item {
            match next {
                Item::Line(line) => result = result.and_then(|()| out.write_all(&line)),
                Item::Flush(ack) => acks.push(ack),
            }
            item = rx.try_recv().ok();
        }
        result = result.and_then(|()| out.flush());
        match result {
            Err(e) => {
                failures.fetch_add(1, Ordering::Relaxed);
                if !failing {
                    tracing::error!(
                        error = &e as &dyn std::error::Error,
                        "writing audit lines failed; lines are being lost"
                    );
                }
                failing = true;
            }
            Ok(()) => failing = false,
        }
        for ack in acks {
            let _ = ack.try_send(());
        }
    }
    let _ = out.flush();
}
