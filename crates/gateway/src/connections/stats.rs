//! Counters of users' connections per `oauth` upstream: connections started (a link opened),
//! completed (tokens stored) and refused (the wrong user, a declined or failed
//! authorization), refreshes that worked or failed, revocations at the authorization server
//! on disconnect, and vault records not used (not sealed, not opening, unreadable).
//!
//! Invariant: the series are fixed at start-up (one set per configured `oauth` upstream), so
//! no request can add one.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::vault_value::{Refused, VaultRecord};

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
    /// Disconnections whose tokens the authorization server revoked, could not revoke, or
    /// offered no revocation endpoint for.
    revoked: [AtomicU64; 3],
    /// Vault values not used, by `VaultRecord` and `Refused` (in their `ALL` order).
    vault_refused: [[AtomicU64; 3]; 2],
}

/// What a revocation at disconnect came to.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Revocation {
    /// The server accepted it (RFC 7009: also when the token was no longer valid).
    Revoked,
    /// Refused, unreachable or too slow (the record is forgotten all the same).
    Failed,
    /// The server offers no revocation endpoint.
    Unsupported,
}

impl Revocation {
    const ALL: [Self; 3] = [Self::Revoked, Self::Failed, Self::Unsupported];

    fn as_str(self) -> &'static str {
        match self {
            Self::Revoked => "revoked",
            Self::Failed => "failed",
            Self::Unsupported => "unsupported",
        }
    }
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

    pub(super) fn revocation(&self, upstream: &str, outcome: Revocation) {
        if let Some(c) = self.0.get(upstream) {
            c.revoked[outcome as usize].fetch_add(1, Relaxed);
        }
    }

    pub(super) fn vault_refused(&self, upstream: &str, record: VaultRecord, why: Refused) {
        if let Some(c) = self.0.get(upstream) {
            c.vault_refused[record as usize][why as usize].fetch_add(1, Relaxed);
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
        out.push_str(
            "# HELP mcpgate_oauth_revocations_total Disconnections (a user's or an operator's) whose tokens this \
             replica asked the authorization server to revoke (RFC 7009).\n\
             # TYPE mcpgate_oauth_revocations_total counter\n",
        );
        for (upstream, c) in &self.0 {
            for outcome in Revocation::ALL {
                let n = c.revoked[outcome as usize].load(Relaxed);
                let outcome = outcome.as_str();
                let _ = writeln!(
                    out,
                    "mcpgate_oauth_revocations_total{{upstream=\"{upstream}\",outcome=\"{outcome}\"}} {n}"
                );
            }
        }
        out.push_str(
            "# HELP mcpgate_oauth_vault_records_refused_total Vault records of oauth upstreams not used (counted \
             as absent): not sealed in the current format (planted), not opening, or unreadable.\n\
             # TYPE mcpgate_oauth_vault_records_refused_total counter\n",
        );
        for (upstream, c) in &self.0 {
            for record in VaultRecord::ALL {
                for why in Refused::ALL {
                    let n = c.vault_refused[record as usize][why as usize].load(Relaxed);
                    let (record, why) = (record.as_str(), why.as_str());
                    let _ = writeln!(
                        out,
                        "mcpgate_oauth_vault_records_refused_total{{upstream=\"{upstream}\",record=\"{record}\",\
                         reason=\"{why}\"}} {n}"
                    );
                }
            }
        }
    }
}
