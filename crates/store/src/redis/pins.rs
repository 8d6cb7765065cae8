//! Pinned tool definitions on Redis: five keys per upstream in one slot (its hash tag), read
//! with HGETALL and written by two scripts (`pin_observe`, `pin_approve`).
//!
//! Invariant: every method is one round trip; both scripts are safe to repeat (an observation
//! repeated records the same, an approval repeated finds the hash approved), so both retry.

use std::collections::{BTreeMap, HashMap};

use redis::Value;

use super::{RedisStore, Retry, reply, scripts};
use crate::contract::Pins;
use crate::error::StoreError;
use crate::pins::{Approval, Approved, MAX_PINNED_TOOLS, Observation, Observed, Withheld, kept_definition};

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

impl Pins for RedisStore {
    async fn pins_observe(&self, upstream: &str, seed: bool, tools: &[Observed]) -> Result<Observation, StoreError> {
        let mut args = Vec::with_capacity(2 + tools.len() * 3);
        args.push(if seed { "1" } else { "0" }.to_owned());
        args.push(MAX_PINNED_TOOLS.to_string());
        for t in tools {
            args.extend([t.tool.clone(), t.hash.clone(), kept_definition(&t.definition)]);
        }
        let keys = self.inner.keys.pins(upstream);
        let out = reply(self.script(Retry::Yes, &scripts::PIN_OBSERVE, keys, args).await?)?;
        let Some((Value::Int(seeded), pairs)) = out.split_first() else {
            return Err(StoreError::corrupt("a pin_observe reply without its seeded flag"));
        };
        let mut approved = BTreeMap::new();
        for pair in pairs.chunks(2) {
            match pair {
                [tool, hash] => {
                    let (Some(tool), Some(hash)) = (text(tool), text(hash)) else {
                        return Err(StoreError::corrupt("a pin is not text"));
                    };
                    approved.insert(tool, hash);
                }
                _ => return Err(StoreError::corrupt("an odd pin_observe reply")),
            }
        }
        Ok(Observation { approved, seeded: *seeded == 1 })
    }

    async fn pins_approved(&self, upstream: &str) -> Result<Approved, StoreError> {
        let mut cmd = redis::cmd("HGETALL");
        cmd.arg(&self.inner.keys.pins(upstream)[0]);
        self.call(Retry::Yes, &cmd, |conn, cmd| Box::pin(cmd.query_async(conn))).await
    }

    async fn pins_withheld(&self, upstream: &str) -> Result<Vec<Withheld>, StoreError> {
        let keys = self.inner.keys.pins(upstream);
        let mut pipe = redis::pipe();
        for key in &keys[..4] {
            pipe.cmd("HGETALL").arg(key);
        }
        type Maps =
            (HashMap<String, String>, HashMap<String, String>, BTreeMap<String, String>, HashMap<String, String>);
        let (approved, approved_defs, seen, mut seen_defs): Maps =
            self.call(Retry::Yes, &pipe, |conn, pipe| Box::pin(pipe.query_async(conn))).await?;
        Ok(seen
            .into_iter()
            .map(|(tool, hash)| Withheld {
                definition: seen_defs.remove(&tool).unwrap_or_default(),
                approved_hash: approved.get(&tool).cloned(),
                approved_definition: approved_defs.get(&tool).cloned(),
                tool,
                hash,
            })
            .collect())
    }

    async fn pins_approve(&self, upstream: &str, tool: &str, hash: &str) -> Result<Approval, StoreError> {
        let keys = self.inner.keys.pins(upstream);
        let args = vec![tool.to_owned(), hash.to_owned(), MAX_PINNED_TOOLS.to_string()];
        let out = reply(self.script(Retry::Yes, &scripts::PIN_APPROVE, keys, args).await?)?;
        match out.as_slice() {
            [Value::Int(1), _] => Ok(Approval::Approved),
            [Value::Int(2), _] => Ok(Approval::Full),
            [Value::Int(0), current] => Ok(Approval::Stale { current: text(current).filter(|h| !h.is_empty()) }),
            other => Err(StoreError::corrupt(format!("unexpected pin_approve reply {other:?}"))),
        }
    }
}
