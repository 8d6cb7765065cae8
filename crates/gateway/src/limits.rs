//! Rate limits per caller, shared by every replica: which buckets a request is charged to
//! (per principal; per principal and upstream), and what the store's answer means for it.
//!
//! Invariants: a request is checked once, against all of its buckets in one store round trip
//! (all or nothing); with no limit configured nothing touches the store; a store that cannot
//! be reached admits the request (a limiter must not turn a Redis outage into an outage of
//! calls that need no Redis), which is counted and logged.

use std::collections::HashMap;
use std::time::Duration;

use mcpgate_runtime::Principal;
use mcpgate_store::{Admission, Bucket, RateLimits};

use crate::config::Config;
use crate::error::GatewayError;
use crate::state::AppState;

/// A configured rate: requests a minute and how many at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Rate {
    per_minute: u64,
    burst: u64,
}

impl Rate {
    /// `None` for a rate of 0 (no limit); a burst of 0 is ten seconds' worth (at least 1).
    fn new(per_minute: u64, burst: u64) -> Option<Self> {
        (per_minute > 0).then(|| Self { per_minute, burst: if burst == 0 { per_minute.div_ceil(6) } else { burst } })
    }
}

/// One upstream's rates.
#[derive(Debug, Clone, Copy, Default)]
struct UpstreamRates {
    calls: Option<Rate>,
    tasks: Option<Rate>,
}

/// What a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge<'a> {
    /// A `tools/call` (of an upstream's tool, or of ours), and whether it creates a task.
    Call {
        /// The upstream of the tool, if any.
        upstream: Option<&'a str>,
        /// Whether the call creates a task.
        task: bool,
    },
    /// A `tasks/get`.
    Poll,
}

/// The configured limits of a replica.
#[derive(Debug, Default)]
pub struct Limits {
    calls: Option<Rate>,
    tasks: Option<Rate>,
    polls: Option<Rate>,
    /// Each upstream's rates (its own, or the `limits.upstream_*` defaults).
    upstreams: HashMap<String, UpstreamRates>,
}

impl Limits {
    /// The limits `config` names.
    pub fn from_config(config: &Config) -> Self {
        let l = &config.limits;
        let upstreams = config
            .upstream
            .iter()
            .map(|u| {
                let own = u.limits;
                let rates = UpstreamRates {
                    calls: Rate::new(
                        own.calls_per_minute.unwrap_or(l.upstream_calls_per_minute),
                        own.calls_burst.unwrap_or(0),
                    ),
                    tasks: Rate::new(
                        own.tasks_per_minute.unwrap_or(l.upstream_tasks_per_minute),
                        own.tasks_burst.unwrap_or(0),
                    ),
                };
                (u.name.clone(), rates)
            })
            .collect();
        Self {
            calls: Rate::new(l.calls_per_minute, l.calls_burst),
            tasks: Rate::new(l.tasks_per_minute, l.tasks_burst),
            polls: Rate::new(l.polls_per_minute, l.polls_burst),
            upstreams,
        }
    }

    /// The buckets `charge` is counted against, each with what it limits (for the refusal).
    fn buckets(&self, charge: Charge<'_>) -> Vec<(Bucket, String)> {
        let mut out = Vec::new();
        let mut add = |name: String, rate: Option<Rate>, soft: bool, what: String| {
            if let Some(rate) = rate {
                let label = format!("{what} ({} a minute, {} at once)", rate.per_minute, rate.burst);
                out.push((Bucket::per_minute(name, rate.per_minute, rate.burst, soft), label));
            }
        };
        match charge {
            Charge::Call { upstream, task } => {
                add("calls".to_owned(), self.calls, false, "tool calls per caller".to_owned());
                if task {
                    add("tasks".to_owned(), self.tasks, false, "task creations per caller".to_owned());
                }
                if let Some(upstream) = upstream {
                    let rates = self.upstreams.get(upstream).copied().unwrap_or_default();
                    add(
                        format!("calls:{upstream}"),
                        rates.calls,
                        false,
                        format!("calls to upstream {upstream} per caller"),
                    );
                    if task {
                        add(
                            format!("tasks:{upstream}"),
                            rates.tasks,
                            false,
                            format!("task creations on upstream {upstream} per caller"),
                        );
                    }
                }
            }
            Charge::Poll => add("polls".to_owned(), self.polls, true, "tasks/get polls per caller".to_owned()),
        }
        out
    }
}

/// Charges one request of `principal`: `Ok(advice)` when admitted (how long a soft limit
/// says to wait before the next request; zero when in time), a 429 error naming the limit
/// when refused.
pub async fn admit(state: &AppState, principal: &Principal, charge: Charge<'_>) -> Result<Duration, GatewayError> {
    let checked = state.limits.buckets(charge);
    if checked.is_empty() {
        return Ok(Duration::ZERO);
    }
    let buckets: Vec<Bucket> = checked.iter().map(|(b, _)| b.clone()).collect();
    match state.store.admit(principal.caller_key(), &buckets).await {
        Ok(Admission::Admitted { advice }) => {
            if !advice.is_zero() {
                state.metrics.poll_advised();
            }
            Ok(advice)
        }
        Ok(Admission::Refused { bucket, retry_after }) => {
            let (refused, limit) = &checked[bucket];
            state.metrics.rate_limited(refused.name.split(':').next().unwrap_or_default(), refused.name.contains(':'));
            Err(GatewayError::RateLimited { limit: limit.clone(), retry_after })
        }
        Err(e) => {
            state.metrics.rate_limit_unchecked();
            if warn_now() {
                tracing::warn!(error = %e, "rate limits not checked (task store unavailable); requests are admitted");
            }
            Ok(Duration::ZERO)
        }
    }
}

/// Whether to log an unchecked admission now: at most once every ten seconds per replica,
/// so an outage does not log once per request (the metric counts every one).
fn warn_now() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = crate::mcp::session::now_ms() / 1000;
    let last = LAST.load(Ordering::Relaxed);
    now >= last.saturating_add(10) && LAST.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml: &str) -> Config {
        crate::config::load_from_str(toml).expect("valid config")
    }

    #[test]
    fn no_limit_configured_means_no_bucket() {
        let limits = Limits::from_config(&Config::default());
        assert!(limits.buckets(Charge::Call { upstream: None, task: true }).is_empty());
        assert!(limits.buckets(Charge::Poll).is_empty());
    }

    #[test]
    fn a_task_call_to_an_upstream_is_charged_to_every_bucket_it_falls_under() {
        let limits = Limits::from_config(&config(
            r#"
            toolset = []
            [limits]
            calls_per_minute = 60
            tasks_per_minute = 12
            tasks_burst = 3
            upstream_calls_per_minute = 30
            [[upstream]]
            name = "files"
            command = "true"
            [[upstream]]
            name = "slow"
            command = "true"
            [upstream.limits]
            calls_per_minute = 0
            tasks_per_minute = 6
            "#,
        ));
        let names = |charge| limits.buckets(charge).into_iter().map(|(b, _)| b.name).collect::<Vec<_>>();
        assert_eq!(names(Charge::Call { upstream: None, task: false }), ["calls"]);
        assert_eq!(names(Charge::Call { upstream: Some("files"), task: true }), ["calls", "tasks", "calls:files"]);
        // Its own table turns the upstream call limit off and sets a task limit.
        assert_eq!(names(Charge::Call { upstream: Some("slow"), task: true }), ["calls", "tasks", "tasks:slow"]);
        let (tasks, label) = &limits.buckets(Charge::Call { upstream: None, task: true })[1];
        assert_eq!((tasks.burst, tasks.interval), (3, Duration::from_secs(5)));
        assert_eq!(label, "task creations per caller (12 a minute, 3 at once)");
        // The default burst is ten seconds' worth.
        assert_eq!(limits.buckets(Charge::Call { upstream: None, task: false })[0].0.burst, 10);
    }

    #[test]
    fn polls_are_a_soft_bucket() {
        let limits = Limits::from_config(&config("[limits]\npolls_per_minute = 120"));
        let buckets = limits.buckets(Charge::Poll);
        assert_eq!(buckets.len(), 1);
        assert!(buckets[0].0.soft);
        assert_eq!(buckets[0].0.burst, 20);
    }
}
