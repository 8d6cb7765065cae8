//! The fleet's seal keys: at start-up a replica compares its key ring with the rings the
//! other live replicas recorded in the store (key ids and fingerprints, never keys) and
//! refuses to start when it could not open what they seal — a key id they hold with other
//! bytes, or a key they seal with that it lacks — instead of joining and then failing every
//! request that carries their tokens or reads their tasks. It warns when they could not open
//! what it seals (its first key is one no other live replica holds). While it runs it keeps
//! its record fresh, and removes it when it stops.
//!
//! A key rotation done as docs/operations.md says (the new key added second everywhere, then
//! moved first, then the old one removed) passes every check. What it does not see: keys
//! that no live replica holds any more but that sealed what is still stored (a retired key's
//! tasks and vault records), and a replica that lost Redis for longer than a record lives.

use std::time::Duration;

use mcpgate_seal::KeyRing;
use mcpgate_store::{AnyStore, RingConflict, RingKey, RingStep};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::error::StartupError;

/// How often a running replica records its ring again.
const REFRESH: Duration = Duration::from_secs(30);

/// How long a record lasts unrefreshed: a few refreshes, so a slow Redis call does not make
/// a live replica look gone.
const LIVE: Duration = Duration::from_secs(120);

/// This replica's ring as the store records it: the sealing key first.
fn prints(ring: &KeyRing) -> Vec<RingKey> {
    ring.fingerprints().map(|(id, fingerprint)| RingKey { id: id.as_str().to_owned(), fingerprint }).collect()
}

/// Checks `ring` against the live replicas' rings and records it as `replica`'s; an error
/// when this replica could not open what the fleet seals. `prefix` is `store.prefix`, named
/// in the advice.
pub(crate) async fn check(store: &AnyStore, replica: &str, ring: &KeyRing, prefix: &str) -> Result<(), StartupError> {
    let conflicts = store.seal_ring(replica, &prints(ring), LIVE, RingStep::Check).await.map_err(|e| {
        StartupError::step_caused("checking seal.keys against the fleet", "the store did not answer", e)
    })?;
    let (refusing, warning): (Vec<_>, Vec<_>) = conflicts.into_iter().partition(RingConflict::refuses);
    for conflict in &warning {
        tracing::warn!("{}", describe(conflict));
    }
    if refusing.is_empty() {
        return Ok(());
    }
    let said: Vec<String> = refusing.iter().map(describe).collect();
    Err(StartupError::config(
        "seal.keys (MCPGATE_SEAL_KEYS)",
        format!(
            "this replica's key ring cannot open what the other replicas seal: {}. Every replica must have \
             the same seal.keys (copy them from a running replica; to rotate, add the new key second \
             everywhere, then move it first, then remove the old one). Replicas' rings are recorded in \
             Redis under {prefix}:seal:rings; a stopped replica's record lapses within {} s",
            said.join("; "),
            LIVE.as_secs()
        ),
    ))
}

/// Records `ring` every [`REFRESH`] until `stopping`, then removes the record, so a replica
/// started after this one stopped is not held to its keys (on `tracker`, which shutdown
/// waits for, so the removal is done before the process exits).
pub(crate) fn keep_recorded(
    store: AnyStore,
    replica: String,
    ring: &KeyRing,
    stopping: CancellationToken,
    tracker: &TaskTracker,
) {
    if matches!(store, AnyStore::Memory(_)) {
        return;
    }
    let ring = prints(ring);
    tracker.spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(REFRESH) => {}
                () = stopping.cancelled() => break,
            }
            match store.seal_ring(&replica, &ring, LIVE, RingStep::Refresh).await {
                Ok(conflicts) => {
                    for conflict in conflicts {
                        tracing::warn!("{}", describe(&conflict));
                    }
                }
                Err(e) => tracing::debug!(
                    error = &e as &dyn std::error::Error,
                    "recording this replica's seal key ring failed; retried"
                ),
            }
        }
        if let Err(e) = store.seal_ring(&replica, &ring, LIVE, RingStep::Forget).await {
            tracing::debug!(
                error = &e as &dyn std::error::Error,
                "removing this replica's seal key ring record failed; it lapses"
            );
        }
    });
}

fn describe(conflict: &RingConflict) -> String {
    match conflict {
        RingConflict::OtherKey { key_id } => {
            format!("another replica holds key id {key_id:?} with a different key (its fingerprint differs)")
        }
        RingConflict::Missing { key_id } => {
            format!("another replica seals with key {key_id:?}, which this replica's seal.keys lacks")
        }
        RingConflict::Unknown { key_id } => format!(
            "this replica seals with key {key_id:?}, which no other running replica holds: they cannot open the \
             tokens and task payloads it seals until they have it (add a new key second on every replica before \
             moving it first)"
        ),
        other => format!("{other:?}"),
    }
}
