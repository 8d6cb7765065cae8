//! Store tests: the conformance suite against the memory store and against a real
//! `redis-server` started by the test, plus Redis-specific properties (round trips per
//! operation, recovery after a restart).

mod at_rest;
mod cluster_failover;
mod drain;
mod memory;
mod redis;
mod replicas_ack;
mod replicas_ack_vault;
mod sentinel;
mod terminal_cache;
mod tls;
