//! Rate limits on Redis: every bucket of a scope is one key under the scope's own hash tag, so
//! one `ratelimit.lua` call checks and charges all of a request's buckets atomically, in one
//! round trip, in one Redis Cluster slot.

use std::time::Duration;

use redis::Value;

use super::{RedisStore, Retry, scripts};
use crate::contract::RateLimits;
use crate::error::StoreError;
use crate::rate::{Admission, Bucket};

impl RateLimits for RedisStore {
    async fn admit(&self, scope: &str, buckets: &[Bucket]) -> Result<Admission, StoreError> {
        if buckets.is_empty() {
            return Ok(Admission::Admitted { advice: Duration::ZERO });
        }
        let keys = buckets.iter().map(|b| self.inner.keys.rate(scope, &b.name)).collect();
        let args = buckets
            .iter()
            .flat_map(|b| {
                let (interval, tolerance, hard) = b.micros();
                [interval.to_string(), tolerance.to_string(), hard.to_string()]
            })
            .collect();
        // Retried after a lost connection: at worst the request is charged twice, which is
        // better than refusing it for the store's sake.
        let reply = self.script(Retry::Yes, &scripts::RATE_LIMIT, keys, args).await?;
        let malformed = || StoreError::corrupt(format!("ratelimit.lua answered {reply:?}"));
        let Value::Array(items) = &reply else { return Err(malformed()) };
        let (Some(Value::Int(bucket)), Some(Value::Int(micros))) = (items.first(), items.get(1)) else {
            return Err(malformed());
        };
        let micros = Duration::from_micros(u64::try_from(*micros).unwrap_or(0));
        Ok(match usize::try_from(*bucket) {
            Ok(0) => Admission::Admitted { advice: micros },
            Ok(i) if i <= buckets.len() => Admission::Refused { bucket: i - 1, retry_after: micros },
            _ => return Err(malformed()),
        })
    }
}
