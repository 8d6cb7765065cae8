//! Connection pool: deadpool over redis-rs multiplexed connections, with wait/create/recycle
//! timeouts. deadpool-redis's own manager pings on every checkout, a second round trip per
//! operation; this manager recycles for free. Instead, when a command fails at the connection
//! level (e.g. Redis restarted) every pooled connection is retired at once (a generation
//! bump), so no later caller draws another dead socket.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use deadpool::managed::{self, Metrics, Object, RecycleError, RecycleResult};
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Client, RedisError};

use crate::error::StoreError;

/// A pooled connection and the pool generation it was made in.
pub(super) struct Tagged {
    pub(super) conn: MultiplexedConnection,
    generation: u64,
}

/// Creates multiplexed connections with bounded connect and response times.
pub(super) struct Manager {
    client: Client,
    config: AsyncConnectionConfig,
    generation: Arc<AtomicU64>,
}

impl managed::Manager for Manager {
    type Type = Tagged;
    type Error = RedisError;

    async fn create(&self) -> Result<Tagged, RedisError> {
        let generation = self.generation.load(Ordering::Acquire);
        let conn = self.client.get_multiplexed_async_connection_with_config(&self.config).await?;
        Ok(Tagged { conn, generation })
    }

    async fn recycle(&self, conn: &mut Tagged, _: &Metrics) -> RecycleResult<RedisError> {
        if conn.generation == self.generation.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(RecycleError::message("connection retired after a connection failure"))
        }
    }
}

/// The pool and its generation counter.
pub(super) struct Connections {
    pool: managed::Pool<Manager>,
    generation: Arc<AtomicU64>,
    timeout: Duration,
}

/// A pooled connection.
pub(super) type Conn = Object<Manager>;

impl Connections {
    /// Builds the pool.
    pub(super) fn new(client: Client, size: usize, timeout: Duration) -> Result<Self, StoreError> {
        let generation = Arc::new(AtomicU64::new(0));
        let config =
            AsyncConnectionConfig::new().set_connection_timeout(Some(timeout)).set_response_timeout(Some(timeout));
        let manager = Manager { client, config, generation: generation.clone() };
        let pool = managed::Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(timeout))
            .create_timeout(Some(timeout))
            .recycle_timeout(Some(timeout))
            .runtime(deadpool::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Config { detail: format!("building the Redis pool: {e}") })?;
        Ok(Self { pool, generation, timeout })
    }

    /// Checks a connection out.
    pub(super) async fn get(&self) -> Result<Conn, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            managed::PoolError::Timeout(_) => {
                StoreError::Timeout { millis: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX) }
            }
            managed::PoolError::Backend(e) => StoreError::Unavailable { detail: e.to_string() },
            other => StoreError::Unavailable { detail: other.to_string() },
        })
    }

    /// After a connection-level failure: drops this connection and retires all others.
    pub(super) fn retire(&self, conn: Conn) {
        self.generation.fetch_add(1, Ordering::AcqRel);
        let _ = Object::take(conn);
    }
}

/// Whether an error means the connection itself is unusable.
pub(super) fn is_connection_failure(error: &RedisError) -> bool {
    error.is_io_error()
        || error.is_connection_dropped()
        || error.is_connection_refusal()
        || error.is_unrecoverable_error()
}
