//! `GET /admin/fleet`: every live replica's heartbeat (see `heartbeat`), read from the store
//! in one round trip, with the replicas whose configuration hash differs from the fleet's
//! majority flagged.
//!
//! Invariant: the answer is what the store lists, at most `MAX_REPLICAS` replicas; a replica
//! that stopped is absent, one that died is absent once its record lapsed.

use std::collections::BTreeMap;

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::routing::get;
use serde_json::{Value, json};

use mcpgate_store::{Fleet as _, Heartbeat};

use super::Failed;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/admin/fleet", get(fleet))
}

async fn fleet(State(state): State<AppState>) -> Result<Json<Value>, Failed> {
    let beats = state.store.fleet().await?;
    let majority = majority(&beats);
    let differing: Vec<&str> =
        beats.iter().filter(|b| majority.is_none_or(|m| m != b.config_hash)).map(|b| b.replica.as_str()).collect();
    let replicas: Vec<Value> = beats
        .iter()
        .map(|b| {
            json!({
                "replica": b.replica,
                "version": b.version,
                "configHash": b.config_hash,
                "configDiffers": differing.contains(&b.replica.as_str()),
                "startedMs": b.started_ms,
                "tasksRunning": b.tasks_running,
                "draining": b.draining,
                "writtenMs": b.written_ms,
                "this": b.replica == state.member.replica,
            })
        })
        .collect();
    Ok(Json(json!({
        "replica": state.member.replica,
        "majorityConfigHash": majority,
        "configDiffers": differing,
        "replicas": replicas,
    })))
}

/// The configuration hash more replicas run than any other (`None` on a tie, or with no
/// replica: then every replica is flagged, as none has the fleet's configuration).
fn majority(beats: &[Heartbeat]) -> Option<&str> {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for b in beats {
        *counts.entry(b.config_hash.as_str()).or_default() += 1;
    }
    let most = counts.values().copied().max()?;
    let mut top = counts.iter().filter(|(_, n)| **n == most);
    match (top.next(), top.next()) {
        (Some((hash, _)), None) => Some(hash),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use mcpgate_store::Heartbeat;

    use super::majority;

    fn beat(replica: &str, hash: &str) -> Heartbeat {
        Heartbeat {
            replica: replica.to_owned(),
            version: "v".to_owned(),
            config_hash: hash.to_owned(),
            started_ms: 0,
            tasks_running: 0,
            draining: false,
            written_ms: 0,
        }
    }

    #[test]
    fn the_majority_is_the_most_run_hash_and_a_tie_has_none() {
        assert_eq!(majority(&[]), None);
        assert_eq!(majority(&[beat("a", "x")]), Some("x"));
        assert_eq!(majority(&[beat("a", "x"), beat("b", "y"), beat("c", "x")]), Some("x"));
        assert_eq!(majority(&[beat("a", "x"), beat("b", "y")]), None);
    }
}
