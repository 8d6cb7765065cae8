//! Test support shared by this crate's tests and the end-to-end tests (feature `testing`):
//! a `redis-server` (or a Redis Cluster, or a Sentinel set) the tests start themselves, the
//! conformance suite every store implementation must pass, and the bounded waits (`wait`)
//! every test that polls goes through.

mod redis_cluster;
mod redis_replicated;
mod redis_sentinel;
mod redis_server;
mod suite;
mod test_ca;
pub mod wait;

pub use redis_cluster::RedisCluster;
pub use redis_replicated::RedisReplicated;
pub use redis_sentinel::RedisSentinelSet;
pub use redis_server::{RedisServer, RedisServerBuilder};
pub use suite::{run_fleet_suite, run_pins_suite, run_suite};
pub use test_ca::TestCa;
