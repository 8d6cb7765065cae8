//! Counters of users' connections per `oauth` upstream: connections started (a link opened),
//! completed (tokens stored) and refused (the wrong user, a declined or failed
//! authorization), and refreshes that worked or failed.
//!
//! Invariant: the series are fixed at start-up (one set per configured `oauth` upstream), so
//! no request can add one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// What happened to a connection attempt.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Attempt {
    Started,
    Completed,
    Refused,
}

#[derive(Debug, Default)]
struct Counters {
    started: AtomicU64,
    completed: AtomicU64,
    refused: AtomicU64,
    refreshed: AtomicU64,
    refresh_failed: AtomicU64,
}

/// The counters of every `oauth` upstream.
#[derive(Debug, Default)]
pub(crate) struct ConnectStats(BTreeMap<String, Counters>);

impl ConnectStats {
    pub(super) fn new(upstreams: &[String]) -> Self {
        Self(upstreams.iter().map(|u| (u.clone(), Counters::default())).collect())
    }

    pub(super) fn attempt(&self, upstream: &str, attempt: Attempt) {
        if let Some(c) = self.0.get(upstream) {
            match attempt {
                Attempt::Started => &c.started,
                Attempt::Completed => &c.completed,
                Attempt::Refused => &c.refused,
            }
            .fetch_add(1, Relaxed);
        }
    }

    pub(super) fn refresh(&self, upstream: &str, ok: bool) {
        if let Some(c) = self.0.get(upstream) {
            if ok { &c.refreshed } else { &c.refresh_failed }.fetch_add(1, Relaxed);
        }
    }

    /// Appends the Prometheus series.
    pub(crate) fn render(&self, out: &mut String) {
        out.push_str(
            "# HELP mcpgate_oauth_connections_total Users' connections to oauth upstreams: links opened (started), \
             tokens stored (completed), refused.\n# TYPE mcpgate_oauth_connections_total counter\n",
        );
        for (upstream, c) in &self.0 {
            for (outcome, n) in [("started", &c.started), ("completed", &c.completed), ("refused", &c.refused)] {
                let n = n.load(Relaxed);
                let _ = writeln!(
                    out,
                    "mcpgate_oauth_connections_total{{upstream=\"{upstream}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        out.push_str(
            "# HELP mcpgate_oauth_refreshes_total Refreshes of users' upstream access tokens by this replica.\n\
             # TYPE mcpgate_oauth_refreshes_total counter\n",
        );
        for (upstream, c) in &self.0 {
            for (outcome, n) in [("ok", &c.refreshed), ("failed", &c.refresh_failed)] {
                let n = n.load(Relaxed);
                let _ =
                    writeln!(out, "mcpgate_oauth_refreshes_total{{upstream=\"{upstream}\",outcome=\"{outcome}\"}} {n}");
            }
        }
    }
}
