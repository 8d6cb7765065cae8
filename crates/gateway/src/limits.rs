//! Rate limits per caller, shared by every replica: which buckets a request is charged to
//! (per principal; per principal and upstream, for every request that goes to the upstream:
//! its tools' calls, its prompts, its resources), and what the store's answer means for it.
//!
//! Invariants: a request is checked once, against all of its buckets in one store round trip
//! (all or nothing); with no limit configured nothing touches the store; a store that cannot
//! be reached admits the request (a limiter must not turn a Redis outage into an outage of
//! calls that need no Redis), which is counted and logged.

use std::collections::HashMap;
use std::time::Duration;

use std::sync::Arc;

use mcpgate_runtime::Principal;
use mcpgate_store::{Admission, AnyStore, Bucket, RateLimits};

use crate::config::Config;
use crate::error::GatewayError;
use crate::metrics::Metrics;
use crate::time::now_ms;

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

/// One configured limit, built once at start-up: its bucket and how a refusal names it.
#[derive(Debug)]
struct Limit {
    bucket: Bucket,
    label: String,
}

impl Limit {
    /// `None` when `rate` is no limit.
    fn new(name: String, rate: Option<Rate>, soft: bool, what: &str) -> Option<Self> {
        rate.map(|rate| Self {
            bucket: Bucket::per_minute(name, rate.per_minute, rate.burst, soft),
            label: format!("{what} ({} a minute, {} at once)", rate.per_minute, rate.burst),
        })
    }
}

/// One upstream's limits.
#[derive(Debug, Default)]
struct UpstreamLimits {
    calls: Option<Limit>,
    tasks: Option<Limit>,
}

/// What a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Charge<'a> {
    /// A `tools/call` (of an upstream's tool, or of ours), and whether it creates a task.
    Call {
        /// The upstream of the tool, if any.
        upstream: Option<&'a str>,
        /// Whether the call creates a task.
        task: bool,
    },
    /// A task made of a call that was already charged as a plain call (it became a task while
    /// it ran): the task buckets only.
    Task {
        /// The upstream of the tool, if any.
        upstream: Option<&'a str>,
    },
    /// Another request that goes to an upstream (`prompts/get` of its prompt, `resources/read`
    /// of its resource): that upstream's call bucket.
    Upstream {
        /// The upstream.
        upstream: &'a str,
    },
    /// A `tasks/get`.
    Poll,
}

/// The configured limits of a replica, and where they are counted.
#[derive(Debug)]
pub(crate) struct Limits {
    rates: Rates,
    /// Where every replica's buckets are kept.
    store: AnyStore,
    /// Refusals, advice and unchecked admissions are counted here.
    metrics: Arc<Metrics>,
}

/// The configured rates.
#[derive(Debug, Default)]
struct Rates {
    calls: Option<Limit>,
    tasks: Option<Limit>,
    polls: Option<Limit>,
    /// Each upstream's limits (its own rates, or the `limits.upstream_*` defaults).
    upstreams: HashMap<String, UpstreamLimits>,
}

impl Limits {
    /// The limits `config` names, counted in `store`.
    pub(crate) fn new(config: &Config, store: AnyStore, metrics: Arc<Metrics>) -> Self {
        Self { rates: Rates::from_config(config), store, metrics }
    }

    /// Charges one request of `principal`: `Ok(advice)` when admitted (how long a soft limit
    /// says to wait before the next request; zero when in time), a 429 error naming the limit
    /// when refused.
    pub(crate) async fn admit(&self, principal: &Principal, charge: Charge<'_>) -> Result<Duration, GatewayError> {
        let checked = self.rates.applying(charge);
        if checked.is_empty() {
            return Ok(Duration::ZERO);
        }
        let buckets: Vec<Bucket> = checked.iter().map(|l| l.bucket.clone()).collect();
        match self.store.admit(principal.caller_key(), &buckets).await {
            Ok(Admission::Admitted { advice }) => {
                if !advice.is_zero() {
                    self.metrics.poll_advised();
                }
                Ok(advice)
            }
            Ok(Admission::Refused { bucket, retry_after }) => {
                let refused = checked[bucket];
                let name = &refused.bucket.name;
                self.metrics.rate_limited(name.split(':').next().unwrap_or_default(), name.contains(':'));
                Err(GatewayError::RateLimited { limit: refused.label.clone(), retry_after })
            }
            Err(e) => {
                self.metrics.rate_limit_unchecked();
                if warn_now() {
                    tracing::warn!(
                        error = &e as &dyn std::error::Error,
                        "rate limits not checked (task store unavailable); requests are admitted"
                    );
                }
                Ok(Duration::ZERO)
            }
        }
    }
}

impl Rates {
    /// The rates `config` names.
    fn from_config(config: &Config) -> Self {
        let l = &config.limits;
        let upstreams = config
            .upstream
            .iter()
            .map(|u| {
                let (own, name) = (u.limits, &u.name);
                let calls = Rate::new(
                    own.calls_per_minute.unwrap_or(l.upstream_calls_per_minute),
                    own.calls_burst.unwrap_or(0),
                );
                let tasks = Rate::new(
                    own.tasks_per_minute.unwrap_or(l.upstream_tasks_per_minute),
                    own.tasks_burst.unwrap_or(0),
                );
                let limits = UpstreamLimits {
                    calls: Limit::new(
                        format!("calls:{name}"),
                        calls,
                        false,
                        &format!("calls to upstream {name} per caller"),
                    ),
                    tasks: Limit::new(
                        format!("tasks:{name}"),
                        tasks,
                        false,
                        &format!("task creations on upstream {name} per caller"),
                    ),
                };
                (name.clone(), limits)
            })
            .collect();
        Self {
            calls: Limit::new(
                "calls".to_owned(),
                Rate::new(l.calls_per_minute, l.calls_burst),
                false,
                "tool calls per caller",
            ),
            tasks: Limit::new(
                "tasks".to_owned(),
                Rate::new(l.tasks_per_minute, l.tasks_burst),
                false,
                "task creations per caller",
            ),
            polls: Limit::new(
                "polls".to_owned(),
                Rate::new(l.polls_per_minute, l.polls_burst),
                true,
                "tasks/get polls per caller",
            ),
            upstreams,
        }
    }

    /// The limits `charge` is counted against (none allocated when none apply).
    fn applying(&self, charge: Charge<'_>) -> Vec<&Limit> {
        let upstream = |u: Option<&str>| u.and_then(|u| self.upstreams.get(u));
        let candidates = match charge {
            Charge::Call { upstream: u, task } => [
                self.calls.as_ref(),
                self.tasks.as_ref().filter(|_| task),
                upstream(u).and_then(|l| l.calls.as_ref()),
                upstream(u).and_then(|l| l.tasks.as_ref()).filter(|_| task),
            ],
            Charge::Task { upstream: u } => {
                [self.tasks.as_ref(), upstream(u).and_then(|l| l.tasks.as_ref()), None, None]
            }
            Charge::Upstream { upstream: u } => [upstream(Some(u)).and_then(|l| l.calls.as_ref()), None, None, None],
            Charge::Poll => [self.polls.as_ref(), None, None, None],
        };
        candidates.into_iter().flatten().collect()
    }
}

/// Whether to log an unchecked admission now: at most once every ten seconds per replica,
/// so an outage does not log once per request (the metric counts every one).
fn warn_now() -> bool {
    use std::sync::atomic::{AtomicU64, Ordering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let now = now_ms() / 1000;
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
        let limits = Rates::from_config(&Config::default());
        assert!(limits.applying(Charge::Call { upstream: None, task: true }).is_empty());
        assert!(limits.applying(Charge::Poll).is_empty());
    }

    #[test]
    fn a_task_call_to_an_upstream_is_charged_to_every_bucket_it_falls_under() {
        let limits = Rates::from_config(&config(
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
        let names = |charge| limits.applying(charge).into_iter().map(|l| l.bucket.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(Charge::Call { upstream: None, task: false }), ["calls"]);
        assert_eq!(names(Charge::Call { upstream: Some("files"), task: true }), ["calls", "tasks", "calls:files"]);
        // Its own table turns the upstream call limit off and sets a task limit.
        assert_eq!(names(Charge::Call { upstream: Some("slow"), task: true }), ["calls", "tasks", "tasks:slow"]);
        let tasks = limits.applying(Charge::Call { upstream: None, task: true })[1];
        assert_eq!((tasks.bucket.burst, tasks.bucket.interval), (3, Duration::from_secs(5)));
        assert_eq!(tasks.label, "task creations per caller (12 a minute, 3 at once)");
        // The default burst is ten seconds' worth.
        assert_eq!(limits.applying(Charge::Call { upstream: None, task: false })[0].bucket.burst, 10);
    }

    #[test]
    fn tasks_made_of_running_calls_and_upstream_reads_are_charged_to_their_own_buckets() {
        let limits = Rates::from_config(&config(
            r#"
            toolset = []
            [limits]
            calls_per_minute = 60
            tasks_per_minute = 12
            upstream_calls_per_minute = 30
            upstream_tasks_per_minute = 6
            [[upstream]]
            name = "files"
            command = "true"
            "#,
        ));
        let names = |charge| limits.applying(charge).into_iter().map(|l| l.bucket.name.clone()).collect::<Vec<_>>();
        // The call was charged already: only the task buckets.
        assert_eq!(names(Charge::Task { upstream: None }), ["tasks"]);
        assert_eq!(names(Charge::Task { upstream: Some("files") }), ["tasks", "tasks:files"]);
        // A prompt or resource of the upstream: its call bucket, not the tool-call one.
        assert_eq!(names(Charge::Upstream { upstream: "files" }), ["calls:files"]);
        assert!(names(Charge::Upstream { upstream: "unknown" }).is_empty());
    }

    #[test]
    fn polls_are_a_soft_bucket() {
        let limits = Rates::from_config(&config("[limits]\npolls_per_minute = 120"));
        let polls = limits.applying(Charge::Poll);
        assert_eq!(polls.len(), 1);
        assert!(polls[0].bucket.soft);
        assert_eq!(polls[0].bucket.burst, 20);
    }
}
