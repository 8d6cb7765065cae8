//! Redis call latency and failures, for `/metrics`: every call the Redis store makes (a
//! script, a read, a pipeline) is one observation, from the call to the reply.
//!
//! Invariant: fixed buckets and labels; recording is a few relaxed atomic increments.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const BUCKETS: [f64; 12] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.0];

/// How a store call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallOutcome {
    /// Redis answered (including with an error reply the caller handles).
    Ok,
    /// The connection failed or Redis answered with an error.
    Error,
    /// No answer within the command timeout.
    Timeout,
}

/// Latency histogram and outcome counters of the Redis store.
#[derive(Debug, Default)]
pub struct StoreMetrics {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_micros: AtomicU64,
    count: AtomicU64,
    errors: AtomicU64,
    timeouts: AtomicU64,
}

impl StoreMetrics {
    pub(crate) fn record(&self, elapsed: Duration, outcome: CallOutcome) {
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| secs <= *b).unwrap_or(BUCKETS.len());
        self.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        match outcome {
            CallOutcome::Ok => {}
            CallOutcome::Error => {
                self.errors.fetch_add(1, Ordering::Relaxed);
            }
            CallOutcome::Timeout => {
                self.timeouts.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Appends the Prometheus text exposition.
    pub fn render(&self, out: &mut String) {
        out.push_str(
            "# HELP mcpgate_redis_call_duration_seconds Redis calls (script, read or pipeline), call to reply.\n",
        );
        out.push_str("# TYPE mcpgate_redis_call_duration_seconds histogram\n");
        let mut cumulative = 0;
        for (i, bound) in BUCKETS.iter().enumerate() {
            cumulative += self.buckets[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "mcpgate_redis_call_duration_seconds_bucket{{le=\"{bound}\"}} {cumulative}");
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "mcpgate_redis_call_duration_seconds_bucket{{le=\"+Inf\"}} {count}");
        let sum = self.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let _ = writeln!(out, "mcpgate_redis_call_duration_seconds_sum {sum}");
        let _ = writeln!(out, "mcpgate_redis_call_duration_seconds_count {count}");
        out.push_str("# HELP mcpgate_redis_call_failures_total Redis calls that failed, by kind.\n");
        out.push_str("# TYPE mcpgate_redis_call_failures_total counter\n");
        let _ = writeln!(
            out,
            "mcpgate_redis_call_failures_total{{kind=\"error\"}} {}",
            self.errors.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "mcpgate_redis_call_failures_total{{kind=\"timeout\"}} {}",
            self.timeouts.load(Ordering::Relaxed)
        );
    }
}
