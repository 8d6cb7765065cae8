//! The fleet's seal key rings in Redis (`<p>:seal:rings`, one hash field per live replica),
//! checked and recorded in one atomic step by `seal_ring.lua`.

use std::time::Duration;

use redis::Value;

use super::{RedisStore, Retry, reply, scripts};
use crate::clock::millis;
use crate::error::StoreError;
use crate::seal_ring::{RingConflict, RingKey, RingStep};

impl RedisStore {
    /// Checks `ring` (the sealing key first) against the rings the other replicas recorded
    /// within `live`, and records it as replica `replica`'s (see [`RingStep`]).
    pub async fn seal_ring(
        &self,
        replica: &str,
        ring: &[RingKey],
        live: Duration,
        step: RingStep,
    ) -> Result<Vec<RingConflict>, StoreError> {
        let sealing = ring.first().map_or("", |k| k.id.as_str());
        let keys: Vec<String> = ring.iter().map(|k| format!("{}={}", k.id, k.fingerprint)).collect();
        let mode = match step {
            RingStep::Check => "check",
            RingStep::Refresh => "refresh",
            RingStep::Forget => "forget",
        };
        let args = vec![
            replica.to_owned(),
            millis(live).to_string(),
            mode.to_owned(),
            format!("{sealing}|{}", keys.join(",")),
        ];
        let out = reply(self.script(Retry::Yes, &scripts::SEAL_RING, vec![self.inner.keys.seal_rings()], args).await?)?;
        let text = |v: &Value| match v {
            Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        };
        let mut conflicts = Vec::with_capacity(out.len() / 2);
        for pair in out.chunks(2) {
            let (Some(kind), Some(key_id)) = (pair.first().and_then(text), pair.get(1).and_then(text)) else {
                return Err(StoreError::corrupt("unexpected seal ring reply"));
            };
            conflicts.push(match kind.as_str() {
                "other_key" => RingConflict::OtherKey { key_id },
                "missing" => RingConflict::Missing { key_id },
                "unknown" => RingConflict::Unknown { key_id },
                _ => return Err(StoreError::corrupt(format!("unknown seal ring conflict {kind:?}"))),
            });
        }
        conflicts.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
        Ok(conflicts)
    }
}
