//! The fleet's heartbeats: each live replica writes one record (its version, config hash,
//! start time, tasks running, whether it drains) every few seconds with a lifetime, so any
//! replica can list the live fleet; a replica that stops removes its record, one that dies
//! lapses once its lifetime passes unrefreshed.
//!
//! Invariant: a listing holds live records only (written within their lifetime by the
//! store's clock: Redis's, so replicas' clocks need not agree), at most [`MAX_REPLICAS`] of
//! them, each field at most [`MAX_FIELD_BYTES`] bytes. Threat model: a guide for operators,
//! not a security boundary — whoever can write to Redis can forge or remove records.

use serde::{Deserialize, Serialize};

/// At most this many replicas are listed (and recorded: a new replica beyond it is not).
pub const MAX_REPLICAS: usize = 1024;

/// Each text field of a heartbeat is cut to this many bytes.
pub const MAX_FIELD_BYTES: usize = 128;

/// What a replica says of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The replica's id (the one its seal key ring record uses).
    pub replica: String,
    /// The mcpgate version it runs.
    pub version: String,
    /// SHA-256 (lowercase hex) of its effective configuration without secrets: replicas
    /// with different hashes run different configurations.
    pub config_hash: String,
    /// When it started, Unix ms.
    pub started_ms: u64,
    /// Tasks running on it now.
    pub tasks_running: u64,
    /// Whether it is draining (takes no new work).
    pub draining: bool,
    /// When the store wrote this record, Unix ms by the store's clock (set by the store:
    /// what a replica sends is ignored).
    pub written_ms: u64,
}

impl Heartbeat {
    /// This heartbeat with every text field cut to [`MAX_FIELD_BYTES`] (at a char boundary).
    pub(crate) fn bounded(&self) -> Self {
        Self {
            replica: cut(&self.replica),
            version: cut(&self.version),
            config_hash: cut(&self.config_hash),
            ..self.clone()
        }
    }
}

fn cut(s: &str) -> String {
    let mut end = s.len().min(MAX_FIELD_BYTES);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
