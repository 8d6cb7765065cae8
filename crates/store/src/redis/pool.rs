//! The connections of one replica to a single Redis server: a small fixed set of multiplexed
//! connections that every concurrent call shares. A call clones a handle of the next
//! connection (round robin) and never waits for a checkout; concurrent commands pipeline on
//! one socket, so both sides move many commands per syscall. (An exclusive-checkout pool of
//! multiplexed connections serialises the callers of each connection and caps a replica at
//! pool-size commands in flight: it defeats the multiplexing.)
//!
//! Invariants: a connection is made lazily, one connect per slot at a time, bounded by the
//! command timeout; when a command fails at the connection level (e.g. Redis restarted) every
//! connection of that generation is retired at once, so no later caller draws another dead
//! socket.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use crate::error::StoreError;

/// A connection handle and the generation it was made in.
#[derive(Clone)]
pub(super) struct Pooled {
    pub(super) conn: MultiplexedConnection,
    pub(super) generation: u64,
}

/// The shared connections.
pub(super) struct Connections {
    client: Client,
    config: AsyncConnectionConfig,
    /// The live connection of each slot (`None` until made, or once retired).
    slots: Box<[Mutex<Option<Pooled>>]>,
    /// One connect per slot at a time: callers arriving meanwhile wait for it.
    connecting: Box<[tokio::sync::Mutex<()>]>,
    next: AtomicUsize,
    generation: AtomicU64,
    timeout: Duration,
}

impl Connections {
    /// `size` connections (at least one), made on first use.
    pub(super) fn new(client: Client, size: usize, timeout: Duration) -> Self {
        let size = size.max(1);
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        Self {
            client,
            config,
            slots: (0..size).map(|_| Mutex::new(None)).collect(),
            connecting: (0..size).map(|_| tokio::sync::Mutex::new(())).collect(),
            next: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            timeout,
        }
    }

    /// A handle of the next connection, connecting it first if need be.
    pub(super) async fn get(&self) -> Result<Pooled, StoreError> {
        let slot = self.next.fetch_add(1, Ordering::Relaxed) % self.slots.len();
        if let Some(conn) = self.live(slot) {
            return Ok(conn);
        }
        let timeout = || StoreError::Timeout { millis: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX) };
        let _connecting =
            tokio::time::timeout(self.timeout, self.connecting[slot].lock()).await.map_err(|_| timeout())?;
        // Someone else may have connected it while we waited.
        if let Some(conn) = self.live(slot) {
            return Ok(conn);
        }
        let generation = self.generation.load(Ordering::Acquire);
        let conn =
            tokio::time::timeout(self.timeout, self.client.get_multiplexed_async_connection_with_config(&self.config))
                .await
                .map_err(|_| timeout())?
                .map_err(|e| StoreError::Unavailable { detail: e.to_string() })?;
        let conn = Pooled { conn, generation };
        *self.slots[slot].lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(conn.clone());
        Ok(conn)
    }

    /// After a connection-level failure on a connection of `generation`: retires every
    /// connection of it (once, however many callers saw the failure).
    pub(super) fn retire(&self, generation: u64) {
        let _ = self.generation.compare_exchange(
            generation,
            generation.wrapping_add(1),
            Ordering::AcqRel,
            Ordering::Acquire,
        );
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

/// Whether an error means the connection itself is unusable.
pub(super) fn is_connection_failure(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
}
