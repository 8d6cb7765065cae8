//! The conformance suite against the memory store.

use mcpgate_store::MemoryStore;
use mcpgate_store::testing::{run_fleet_suite, run_pins_suite, run_suite};

#[tokio::test]
async fn memory_store_honours_the_contract() {
    run_suite(|| async { MemoryStore::new(16) }).await;
}

#[tokio::test]
async fn memory_store_keeps_pins() {
    run_pins_suite(|| async { MemoryStore::new(16) }).await;
}

#[tokio::test]
async fn memory_store_keeps_heartbeats() {
    run_fleet_suite(|| async { MemoryStore::new(16) }).await;
}
