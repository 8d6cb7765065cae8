//! The fleet's heartbeats in Redis: `<p>:{<p>:fleet}:expiries` (sorted set, replica id ->
//! expiry) and `<p>:{<p>:fleet}:records` (hash, replica id -> record), written, listed and
//! trimmed by `heartbeat.lua`, one round trip each and no SCAN.

use std::time::Duration;

use redis::Value;

use super::{RedisStore, Retry, reply, scripts};
use crate::clock::millis;
use crate::contract::Fleet;
use crate::error::StoreError;
use crate::fleet::{Heartbeat, MAX_REPLICAS};

impl RedisStore {
    async fn heartbeat(&self, mode: &str, replica: &str, record: String, live: Duration) -> Result<Value, StoreError> {
        let args =
            vec![mode.to_owned(), replica.to_owned(), record, millis(live).to_string(), MAX_REPLICAS.to_string()];
        self.script(Retry::Yes, &scripts::HEARTBEAT, self.inner.keys.heartbeats(), args).await
    }
}

impl Fleet for RedisStore {
    async fn beat(&self, beat: &Heartbeat, live: Duration) -> Result<bool, StoreError> {
        let beat = Heartbeat { written_ms: 0, ..beat.bounded() };
        let json = serde_json::to_string(&beat)
            .map_err(|e| StoreError::corrupt_caused("a heartbeat that does not encode", e))?;
        match self.heartbeat("beat", &beat.replica, json, live).await? {
            Value::Int(n) => Ok(n == 1),
            other => Err(StoreError::corrupt(format!("unexpected heartbeat reply {other:?}"))),
        }
    }

    async fn fleet(&self) -> Result<Vec<Heartbeat>, StoreError> {
        let out = reply(self.heartbeat("list", "", String::new(), Duration::ZERO).await?)?;
        let mut beats = Vec::with_capacity(out.len());
        for v in out {
            let Value::BulkString(bytes) = v else {
                return Err(StoreError::corrupt("unexpected heartbeat record"));
            };
            let text = String::from_utf8_lossy(&bytes);
            let Some((written, json)) = text.split_once('|') else {
                return Err(StoreError::corrupt("a heartbeat record without its time"));
            };
            // A record this version cannot read (another version's, or not ours) is skipped.
            let Ok(mut beat) = serde_json::from_str::<Heartbeat>(json) else {
                continue;
            };
            beat.written_ms = written.parse().unwrap_or(0);
            beats.push(beat.bounded());
        }
        beats.sort_by(|a, b| a.replica.cmp(&b.replica));
        Ok(beats)
    }

    async fn leave(&self, replica: &str) -> Result<(), StoreError> {
        self.heartbeat("leave", replica, String::new(), Duration::ZERO).await.map(|_| ())
    }
}
