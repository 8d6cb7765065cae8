//! The connections of one replica to a single Redis server: a small fixed set of multiplexed
//! connections that every concurrent call shares. A call clones a handle of the next
//! connection (round robin) and never waits for a checkout; concurrent commands pipeline on
//! one socket, so both sides move many commands per syscall. (An exclusive-checkout pool of
//! multiplexed connections serialises the callers of each connection and caps a replica at
//! pool-size commands in flight: it defeats the multiplexing.)
//!
//! Invariants: a connection is made lazily, one connect per slot at a time, bounded by the
//! command timeout, to the server the node source names (see `sentinel`); when a command fails
//! at the connection level (e.g. Redis restarted, or a `-READONLY` reply from a demoted
//! primary) every connection of that generation is retired at once, and the source's
//! resolution with it, so no later caller draws another dead socket or a replica. A timeout is not a failure of the connection (Redis may be busy or paused, and a
//! multiplexed connection matches late replies to their abandoned requests): after a timeout
//! a bounded `PING` probes the connection and retires the generation if it gets no answer,
//! and so do a few timeouts in a row, so a half-open socket is never reused for long.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, RedisError};

use super::sentinel::NodeSource;
use crate::error::StoreError;

/// A connection handle and the generation it was made in.
#[derive(Clone)]
pub(super) struct Pooled {
    pub(super) conn: MultiplexedConnection,
    pub(super) generation: u64,
}

/// The shared connections.
pub(super) struct Connections {
    source: std::sync::Arc<NodeSource>,
    /// The source's epoch of the newest connection made (retired with a generation).
    node_epoch: AtomicU64,
    config: AsyncConnectionConfig,
    /// The live connection of each slot (`None` until made, or once retired).
    slots: Box<[Mutex<Option<Pooled>>]>,
    /// One connect per slot at a time: callers arriving meanwhile wait for it.
    connecting: Box<[tokio::sync::Mutex<()>]>,
    next: AtomicUsize,
    generation: AtomicU64,
    timeout: Duration,
    /// Calls that timed out since the last one that did not.
    timeouts_in_a_row: AtomicU32,
    /// A probe of the current generation is under way (one at a time).
    probing: AtomicBool,
}

/// Timeouts in a row after which the connections are replaced without waiting for a probe.
const RETIRE_AFTER_TIMEOUTS: u32 = 3;

impl Connections {
    /// `size` connections (at least one), made on first use.
    pub(super) fn new(source: std::sync::Arc<NodeSource>, size: usize, timeout: Duration) -> Self {
        let size = size.max(1);
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        Self {
            source,
            node_epoch: AtomicU64::new(0),
            config,
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            connecting: (0..size).map(|_| tokio::sync::Mutex::new(())).collect(),
            next: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            timeout,
            timeouts_in_a_row: AtomicU32::new(0),
            probing: AtomicBool::new(false),
        }
    }

    /// A call on a connection of this pool got an answer (of any kind).
    pub(super) fn answered(&self) {
        if self.timeouts_in_a_row.load(Ordering::Relaxed) != 0 {
            self.timeouts_in_a_row.store(0, Ordering::Relaxed);
        }
    }

    /// A call on `conn` (of `generation`) timed out: probes the connection with a bounded
    /// `PING` in the background (retiring the generation if it gets no answer), and retires
    /// it at once after a few timeouts in a row. Returns whether it retired.
    pub(super) fn timed_out(self: &std::sync::Arc<Self>, generation: u64, conn: Option<MultiplexedConnection>) -> bool {
        let in_a_row = self.timeouts_in_a_row.fetch_add(1, Ordering::Relaxed) + 1;
        if in_a_row >= RETIRE_AFTER_TIMEOUTS {
            self.timeouts_in_a_row.store(0, Ordering::Relaxed);
            self.retire(generation);
            return true;
        }
        if let Some(mut conn) = conn
            && !self.probing.swap(true, Ordering::AcqRel)
        {
            let pool = std::sync::Arc::clone(self);
            tokio::spawn(async move {
                let ping = redis::cmd("PING");
                let answered = tokio::time::timeout(pool.timeout, ping.query_async::<String>(&mut conn))
                    .await
                    .is_ok_and(|r| r.is_ok());
                if !answered {
                    tracing::warn!(
                        "a Redis connection did not answer a PING after a timeout; replacing the connections"
                    );
                    pool.retire(generation);
                }
                pool.probing.store(false, Ordering::Release);
            });
        }
        false
    }

    /// A handle of the next connection, connecting it first if need be.
    pub(super) async fn get(&self) -> Result<Pooled, StoreError> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        if let Some(conn) = self.live(slot) {
            return Ok(conn);
        }
        let timeout = || StoreError::Timeout { millis: crate::clock::millis(self.timeout) };
        let _connecting =
            tokio::time::timeout(self.timeout, self.connecting[slot].lock()).await.map_err(|_| timeout())?;
        // Someone else may have connected it while we waited.
        if let Some(conn) = self.live(slot) {
            return Ok(conn);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let node = self.source.node().await?;
        self.node_epoch.fetch_max(node.epoch, Ordering::AcqRel);
        let conn =
            tokio::time::timeout(self.timeout, node.client.get_multiplexed_async_connection_with_config(&self.config))
                .await
                .map_err(|_| timeout())?
                .map_err(|e| StoreError::unavailable_caused("connecting to Redis failed", e))?;
        let conn = Pooled { conn, generation };
        *self.slots[slot].lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// After a connection-level failure on a connection of `generation`: retires every
    /// connection of it (once, however many callers saw the failure).
    pub(super) fn retire(&self, generation: u64) {
        let retired = self
            .generation
            .compare_exchange(generation, generation.wrapping_add(1), Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if retired {
            self.source.retire(self.node_epoch.load(Ordering::Acquire));
        }
    }

    /// Slot `slot`'s connection, if made in the current generation.
    fn live(&self, slot: usize) -> Option<Pooled> {
        let current = self.generation.load(Ordering::Acquire);
        let mut guard = self.slots[slot].lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match guard.as_ref() {
            Some(conn) if conn.generation == current => Some(conn.clone()),
            Some(_) => {
                // Retired: dropping our handle lets the dead socket close.
                *guard = None;
                None
            }
            None => None,
        }
    }
}

/// Whether an error means the connection itself is unusable (a timeout does not: see the
/// module's invariants). `-READONLY` counts: the node was demoted under the connection, so
/// every answer from it is suspect; the write it refused did not happen.
pub(super) fn is_connection_failure(error: &RedisError) -> bool {
    is_readonly(error)
        || !error.is_timeout()
            && (error.is_io_error()
                || error.is_connection_dropped()
                || error.is_connection_refusal()
                || error.is_unrecoverable_error())
}

/// A `-READONLY` reply (also from a write inside a script): the node is a replica now.
pub(super) fn is_readonly(error: &RedisError) -> bool {
    // Older servers wrap a script's error in `ERR Error running script`, keeping the reply.
    error.code() == Some("READONLY") || error.to_string().contains("READONLY You can't write")
}
