//! Task state, the job queue and task events: the `TaskStore`, `JobQueue` and `EventBus`
//! contracts (see `contract`), kept in memory (one replica, no Redis) or in Redis (any number
//! of replicas); beside them, the fleet's shared lists, marks, rate limits, a vault of sealed
//! secrets (`Vault`), named locks (`Locks`) and pinned tool definitions (`Pins`).
//!
//! Consistency model: every transition is one atomic step (one Lua script on Redis) that
//! checks the task's lifetime, never overwrites a terminal status, and publishes the task's
//! event as part of the step. Reads are one round trip. A task's keys share one hash tag (its
//! shard, named in the task id), so each step touches one Redis Cluster slot.

mod admin;
mod any;
mod change;
mod clock;
mod contract;
mod error;
mod events;
mod fleet;
mod memory;
mod metrics;
mod model;
mod pins;
mod quota;
mod rate;
mod redis;
mod seal_ring;
#[cfg(feature = "testing")]
pub mod testing;
mod vault;

pub use admin::{PurgeFilter, Purged, ScanPage};
pub use any::AnyStore;
pub use change::Change;
pub use contract::{
    EventBus, Fleet, JobQueue, Locks, OnceMarks, Pins, RateLimits, TaskAdmin, TaskStore, UpstreamLists, Vault,
};
pub use error::{Cause, StoreError};
pub use events::Subscription;
pub use fleet::{Heartbeat, MAX_FIELD_BYTES, MAX_REPLICAS};
pub use memory::MemoryStore;
pub use metrics::StoreMetrics;
pub use model::*;
pub use pins::{Approval, Approved, MAX_DEFINITION_BYTES, MAX_PINNED_TOOLS, Observation, Observed, Withheld};
pub use quota::{Quota, QuotaKind};
pub use rate::{Admission, Bucket};
pub use redis::{RedisOptions, RedisStore, SentinelOptions, TerminalCacheLimits, TerminalCacheStats};
pub use seal_ring::{RingConflict, RingKey, RingStep};
pub use vault::{Expect, Put, VaultEntry, VaultKey, VaultKind, VaultListing, VaultPage};
