//! Prometheus metrics, kept in fixed arrays of atomics so recording a request is a few
//! relaxed increments with no lock and no allocation.
//!
//! Invariant: every label value is drawn from a fixed set (known methods, eras, outcomes), so
//! no client input can grow the number of series.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use mcpgate_protocol::{Era, Method};
use mcpgate_seal::OpenFailure;

/// Labels besides the known methods.
const EXTRA_LABELS: [&str; 4] = ["notification", "response", "unknown", "none"];
const METHODS: usize = Method::ALL.len() + EXTRA_LABELS.len();
const ERAS: [&str; 3] = ["modern", "legacy", "none"];
const OUTCOMES: [&str; 3] = ["ok", "client_error", "server_error"];
const BUCKETS: [f64; 13] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0, 30.0];
/// The `limit` label of `mcpgate_rate_limited_total`.
const RATE_LIMITS: [&str; 5] = ["calls", "tasks", "polls", "upstream_calls", "upstream_tasks"];
const SEAL_REASONS: [OpenFailure; 7] = [
    OpenFailure::TooLong,
    OpenFailure::Malformed,
    OpenFailure::UnsupportedVersion,
    OpenFailure::UnknownKey,
    OpenFailure::Integrity,
    OpenFailure::Expired,
    OpenFailure::Replayed,
];

/// What a request is counted as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodLabel(usize);

impl MethodLabel {
    /// A known method.
    pub fn method(m: Method) -> Self {
        Self(Method::ALL.iter().position(|x| *x == m).unwrap_or(METHODS - 2))
    }
    /// A notification.
    pub const NOTIFICATION: Self = Self(Method::ALL.len());
    /// A response from the client.
    pub const RESPONSE: Self = Self(Method::ALL.len() + 1);
    /// A request for a method this server does not know.
    pub const UNKNOWN: Self = Self(Method::ALL.len() + 2);
    /// Rejected before the body was decoded.
    pub const NONE: Self = Self(Method::ALL.len() + 3);

    fn name(self) -> &'static str {
        Method::ALL.get(self.0).map_or_else(|| EXTRA_LABELS[self.0 - Method::ALL.len()], |m| m.as_str())
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A result (or an accepted notification).
    Ok,
    /// The client's fault.
    ClientError,
    /// Ours.
    ServerError,
}

/// All counters of one replica.
#[derive(Debug)]
pub struct Metrics {
    requests: Vec<AtomicU64>,
    buckets: Vec<AtomicU64>,
    sum_micros: Vec<AtomicU64>,
    count: Vec<AtomicU64>,
    auth_failures: AtomicU64,
    seal_failures: [AtomicU64; SEAL_REASONS.len()],
    missing_mcp_name: AtomicU64,
    handed_off: AtomicU64,
    background_busy: AtomicU64,
    rate_limited: [AtomicU64; RATE_LIMITS.len()],
    polls_advised: AtomicU64,
    rate_limits_unchecked: AtomicU64,
    in_flight: AtomicI64,
}

impl Default for Metrics {
    fn default() -> Self {
        let zeros = |n: usize| (0..n).map(|_| AtomicU64::new(0)).collect::<Vec<_>>();
        Self {
            requests: zeros(METHODS * ERAS.len() * OUTCOMES.len()),
            buckets: zeros(METHODS * (BUCKETS.len() + 1)),
            sum_micros: zeros(METHODS),
            count: zeros(METHODS),
            auth_failures: AtomicU64::new(0),
            seal_failures: Default::default(),
            missing_mcp_name: AtomicU64::new(0),
            handed_off: AtomicU64::new(0),
            background_busy: AtomicU64::new(0),
            rate_limited: Default::default(),
            polls_advised: AtomicU64::new(0),
            rate_limits_unchecked: AtomicU64::new(0),
            in_flight: AtomicI64::new(0),
        }
    }
}

impl Metrics {
    /// Records one finished request.
    pub fn record(&self, method: MethodLabel, era: Option<Era>, outcome: Outcome, elapsed: Duration) {
        let era = match era {
            Some(Era::Modern) => 0,
            Some(Era::Legacy) => 1,
            None => 2,
        };
        let outcome = outcome as usize;
        self.requests[(method.0 * ERAS.len() + era) * OUTCOMES.len() + outcome].fetch_add(1, Ordering::Relaxed);
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS.iter().position(|b| secs <= *b).unwrap_or(BUCKETS.len());
        self.buckets[method.0 * (BUCKETS.len() + 1) + bucket].fetch_add(1, Ordering::Relaxed);
        let micros = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        self.sum_micros[method.0].fetch_add(micros, Ordering::Relaxed);
        self.count[method.0].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a rejected token.
    pub fn auth_failure(&self) {
        self.auth_failures.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a sealed value that did not open.
    pub fn seal_failure(&self, reason: OpenFailure) {
        if let Some(i) = SEAL_REASONS.iter().position(|r| *r == reason) {
            self.seal_failures[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Counts a 2026-07-28 `tasks/*` request accepted without its `Mcp-Name` header.
    pub fn missing_mcp_name(&self) {
        self.missing_mcp_name.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a synchronous call handed to another replica at a checkpoint (load shedding).
    pub fn handed_off(&self) {
        self.handed_off.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a background call refused because every task worker was taken.
    pub fn background_busy(&self) {
        self.background_busy.fetch_add(1, Ordering::Relaxed);
    }

    /// A request refused by the rate limit `limit` (`calls`, `tasks`, `polls`), of an
    /// upstream when `upstream`.
    pub fn rate_limited(&self, limit: &str, upstream: bool) {
        let label = if upstream { format!("upstream_{limit}") } else { limit.to_owned() };
        if let Some(i) = RATE_LIMITS.iter().position(|l| *l == label) {
            self.rate_limited[i].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A poll answered past its soft limit, with advice to wait.
    pub fn poll_advised(&self) {
        self.polls_advised.fetch_add(1, Ordering::Relaxed);
    }

    /// A request admitted without a rate-limit check (the store did not answer).
    pub fn rate_limit_unchecked(&self) {
        self.rate_limits_unchecked.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests being processed on this replica now.
    pub fn in_flight(&self) -> u64 {
        u64::try_from(self.in_flight.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// Marks a request as started; the guard marks it finished (it may outlive the handler,
    /// e.g. inside an SSE task).
    pub fn start(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(self.clone())
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        out.push_str("# HELP mcpgate_requests_total MCP messages handled, by method, era and outcome.\n");
        out.push_str("# TYPE mcpgate_requests_total counter\n");
        for m in 0..METHODS {
            for (e, era) in ERAS.iter().enumerate() {
                for (o, outcome) in OUTCOMES.iter().enumerate() {
                    let n = self.requests[(m * ERAS.len() + e) * OUTCOMES.len() + o].load(Ordering::Relaxed);
                    if n > 0 {
                        let method = MethodLabel(m).name();
                        let _ = writeln!(
                            out,
                            "mcpgate_requests_total{{method=\"{method}\",era=\"{era}\",outcome=\"{outcome}\"}} {n}"
                        );
                    }
                }
            }
        }
        out.push_str(
            "# HELP mcpgate_request_duration_seconds Time from request to response (to the final event for SSE).\n",
        );
        out.push_str("# TYPE mcpgate_request_duration_seconds histogram\n");
        for m in 0..METHODS {
            let count = self.count[m].load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            let method = MethodLabel(m).name();
            let mut cumulative = 0;
            for (b, bound) in BUCKETS.iter().enumerate() {
                cumulative += self.buckets[m * (BUCKETS.len() + 1) + b].load(Ordering::Relaxed);
                let _ = writeln!(
                    out,
                    "mcpgate_request_duration_seconds_bucket{{method=\"{method}\",le=\"{bound}\"}} {cumulative}"
                );
            }
            let _ = writeln!(out, "mcpgate_request_duration_seconds_bucket{{method=\"{method}\",le=\"+Inf\"}} {count}");
            let sum = self.sum_micros[m].load(Ordering::Relaxed) as f64 / 1e6;
            let _ = writeln!(out, "mcpgate_request_duration_seconds_sum{{method=\"{method}\"}} {sum}");
            let _ = writeln!(out, "mcpgate_request_duration_seconds_count{{method=\"{method}\"}} {count}");
        }
        out.push_str(
            "# HELP mcpgate_in_flight_requests Requests being processed.\n# TYPE mcpgate_in_flight_requests gauge\n",
        );
        let _ = writeln!(out, "mcpgate_in_flight_requests {}", self.in_flight.load(Ordering::Relaxed));
        out.push_str("# HELP mcpgate_auth_failures_total Requests rejected for a missing or invalid token.\n");
        out.push_str("# TYPE mcpgate_auth_failures_total counter\n");
        let _ = writeln!(out, "mcpgate_auth_failures_total {}", self.auth_failures.load(Ordering::Relaxed));
        out.push_str(
            "# HELP mcpgate_seal_failures_total Sealed values (session ids, requestState) that did not open.\n",
        );
        out.push_str("# TYPE mcpgate_seal_failures_total counter\n");
        for (i, reason) in SEAL_REASONS.iter().enumerate() {
            let n = self.seal_failures[i].load(Ordering::Relaxed);
            let _ = writeln!(out, "mcpgate_seal_failures_total{{reason=\"{}\"}} {n}", reason.as_str());
        }
        out.push_str(
            "# HELP mcpgate_missing_mcp_name_total 2026-07-28 tasks/* requests accepted without an Mcp-Name header.\n",
        );
        out.push_str("# TYPE mcpgate_missing_mcp_name_total counter\n");
        let _ = writeln!(out, "mcpgate_missing_mcp_name_total {}", self.missing_mcp_name.load(Ordering::Relaxed));
        out.push_str(
            "# HELP mcpgate_calls_handed_off_total Synchronous calls handed to another replica at a checkpoint \
             (load shedding).\n# TYPE mcpgate_calls_handed_off_total counter\n",
        );
        let _ = writeln!(out, "mcpgate_calls_handed_off_total {}", self.handed_off.load(Ordering::Relaxed));
        out.push_str(
            "# HELP mcpgate_background_busy_total Background tool calls refused as busy (every task worker of the \
             replica taken).\n# TYPE mcpgate_background_busy_total counter\n",
        );
        let _ = writeln!(out, "mcpgate_background_busy_total {}", self.background_busy.load(Ordering::Relaxed));
        out.push_str(
            "# HELP mcpgate_rate_limited_total Requests refused by a rate limit (429), by limit.\n\
             # TYPE mcpgate_rate_limited_total counter\n",
        );
        for (limit, n) in RATE_LIMITS.iter().zip(&self.rate_limited) {
            let _ = writeln!(out, "mcpgate_rate_limited_total{{limit=\"{limit}\"}} {}", n.load(Ordering::Relaxed));
        }
        out.push_str(
            "# HELP mcpgate_polls_advised_total tasks/get polls answered past the poll limit's burst, with a \
             longer poll interval saying when to poll next.\n# TYPE mcpgate_polls_advised_total counter\n",
        );
        let _ = writeln!(out, "mcpgate_polls_advised_total {}", self.polls_advised.load(Ordering::Relaxed));
        out.push_str(
            "# HELP mcpgate_rate_limits_unchecked_total Requests admitted without a rate-limit check because the \
             task store did not answer.\n# TYPE mcpgate_rate_limits_unchecked_total counter\n",
        );
        let _ =
            writeln!(out, "mcpgate_rate_limits_unchecked_total {}", self.rate_limits_unchecked.load(Ordering::Relaxed));
        out
    }
}

/// Decrements the in-flight gauge when dropped.
#[derive(Debug)]
pub struct InFlight(Arc<Metrics>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Appends the per-upstream series: calls, errors by kind, in flight, latency, breaker state,
/// stdio restarts, and token exchanges (upstreams with token exchange only).
pub(crate) fn render_upstreams(federation: &mcpgate_upstream::Federation, out: &mut String) {
    use std::fmt::Write as _;
    use std::sync::atomic::Ordering::Relaxed;
    if federation.is_empty() {
        return;
    }
    let upstreams = federation.upstreams();
    // One value per upstream, under a HELP/TYPE header.
    let mut series = |name: &str, kind: &str, help: &str, value: &dyn Fn(&mcpgate_upstream::Upstream) -> String| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for u in upstreams {
            let _ = writeln!(out, "{name}{{upstream=\"{}\"}} {}", u.name(), value(u));
        }
    };
    series("mcpgate_upstream_requests_total", "counter", "Requests sent to an upstream by this replica.", &|u| {
        u.stats().calls.load(Relaxed).to_string()
    });
    series("mcpgate_upstream_in_flight", "gauge", "Upstream requests in flight.", &|u| {
        u.stats().in_flight.load(Relaxed).to_string()
    });
    series(
        "mcpgate_upstream_breaker_open",
        "gauge",
        "Whether the upstream's circuit breaker is open (1) or half-open (0.5).",
        &|u| {
            match u.breaker_state() {
                mcpgate_upstream::BreakerState::Closed => "0",
                mcpgate_upstream::BreakerState::HalfOpen => "0.5",
                mcpgate_upstream::BreakerState::Open => "1",
            }
            .to_owned()
        },
    );
    series(
        "mcpgate_upstream_restarts_total",
        "counter",
        "stdio upstream processes started again after exiting.",
        &|u| u.restarts().to_string(),
    );
    out.push_str("# HELP mcpgate_upstream_errors_total Failed upstream requests by kind.\n# TYPE mcpgate_upstream_errors_total counter\n");
    for u in upstreams {
        for (kind, n) in u.stats().errors() {
            let _ = writeln!(out, "mcpgate_upstream_errors_total{{upstream=\"{}\",kind=\"{kind}\"}} {n}", u.name());
        }
    }
    out.push_str("# HELP mcpgate_upstream_request_duration_seconds Upstream request latency.\n# TYPE mcpgate_upstream_request_duration_seconds histogram\n");
    for u in upstreams {
        let (counts, sum) = u.stats().latency();
        let mut cumulative = 0;
        for (i, count) in counts.iter().enumerate() {
            cumulative += count;
            let le = mcpgate_upstream::LATENCY_BUCKETS.get(i).map_or_else(|| "+Inf".to_owned(), f64::to_string);
            let _ = writeln!(
                out,
                "mcpgate_upstream_request_duration_seconds_bucket{{upstream=\"{}\",le=\"{le}\"}} {cumulative}",
                u.name()
            );
        }
        let _ = writeln!(out, "mcpgate_upstream_request_duration_seconds_sum{{upstream=\"{}\"}} {sum}", u.name());
        let _ =
            writeln!(out, "mcpgate_upstream_request_duration_seconds_count{{upstream=\"{}\"}} {cumulative}", u.name());
    }
    // Token exchange (RFC 8693): only the upstreams that exchange caller tokens.
    let exchanging: Vec<_> =
        upstreams.iter().filter_map(|u| u.token_exchange_stats().map(|stats| (u.name(), stats))).collect();
    if exchanging.is_empty() {
        return;
    }
    for (name, help, value) in [
        (
            "mcpgate_upstream_token_exchanges_total",
            "Caller tokens exchanged at the token endpoint for an upstream's token.",
            &(|s: &mcpgate_upstream::ExchangeStats| s.exchanges.load(Relaxed)) as &dyn Fn(&_) -> u64,
        ),
        (
            "mcpgate_upstream_token_cache_hits_total",
            "Upstream requests whose exchanged token came from the cache.",
            &|s: &mcpgate_upstream::ExchangeStats| s.cache_hits.load(Relaxed),
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for (upstream, stats) in &exchanging {
            let _ = writeln!(out, "{name}{{upstream=\"{upstream}\"}} {}", value(stats));
        }
    }
    out.push_str(
        "# HELP mcpgate_upstream_token_exchange_failures_total Failed token exchanges by kind (the upstream was not called).\n\
         # TYPE mcpgate_upstream_token_exchange_failures_total counter\n",
    );
    for (upstream, stats) in &exchanging {
        for (kind, n) in stats.failures() {
            let _ = writeln!(
                out,
                "mcpgate_upstream_token_exchange_failures_total{{upstream=\"{upstream}\",kind=\"{kind}\"}} {n}"
            );
        }
    }
}
