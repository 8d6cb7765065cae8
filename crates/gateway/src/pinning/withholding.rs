//! Withholding: before a snapshot is built, each pinned upstream's tools are checked against
//! the hashes approved in the store, and a tool whose hash is not the approved one (changed,
//! or new) is left out of the lists the snapshot is built from, so it is neither listed nor
//! callable on this replica; every replica does the same from the same store.
//!
//! Invariant: fail closed — when the pins cannot be read (store outage), every tool of a
//! pinned upstream is withheld, never served unchecked; this replica's last view of each
//! upstream's approved hashes is kept only to notice an approval made elsewhere, never to
//! decide what is served.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};

use mcpgate_store::{AnyStore, Approved, Observed, Pins as _};
use mcpgate_upstream::config::PinMode;
use mcpgate_upstream::{Federation, Lists};

use super::definition::observe;

/// Longest description quoted in a log line.
const LOGGED_DESCRIPTION_CHARS: usize = 80;

/// This replica's view of the pinned upstreams.
#[derive(Debug, Default)]
pub(crate) struct Pinning {
    /// Pinned upstream → tools withheld from the current snapshot (for the metric, and to log
    /// each tool once when it starts being withheld).
    withheld: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// Pinned upstream → the approved hashes last read (`None`: unreadable at the last build,
    /// so any readable answer is news).
    approved: Mutex<BTreeMap<String, Option<Approved>>>,
}

impl Pinning {
    /// `lists` as the snapshot may serve them: each pinned upstream's tools whose hash is
    /// approved; the others withheld (and recorded in the store as seen, for `diff`).
    pub(crate) async fn served(
        &self,
        store: &AnyStore,
        federation: &Federation,
        lists: &[Option<Lists>],
    ) -> Vec<Option<Lists>> {
        let mut served = lists.to_vec();
        for (upstream, held) in federation.upstreams().iter().zip(served.iter_mut()) {
            let mode = upstream.config().pin;
            if !mode.is_pinned() {
                continue;
            }
            let name = upstream.name();
            let Some(lists) = held.as_mut() else {
                continue;
            };
            let observed: Vec<(Observed, Option<String>)> = lists
                .tools
                .iter()
                .filter(|t| upstream.config().exposes(&t.name))
                .map(|t| (observe(t), t.description.clone()))
                .collect();
            let tools: Vec<Observed> = observed.iter().map(|(o, _)| o.clone()).collect();
            let approved = match store.pins_observe(name, mode == PinMode::FirstSeen, &tools).await {
                Ok(approved) => Some(approved),
                Err(e) => {
                    tracing::warn!(upstream = name, error = %e,
                        "cannot read the upstream's pinned definitions: withholding every tool of it until the store answers");
                    None
                }
            };
            let allowed = |o: &Observed| approved.as_ref().is_some_and(|a| a.get(&o.tool) == Some(&o.hash));
            let withheld_now: BTreeSet<String> =
                observed.iter().filter(|(o, _)| !allowed(o)).map(|(o, _)| o.tool.clone()).collect();
            lists.tools.retain(|t| !withheld_now.contains(&t.name));
            self.note(name, &observed, approved.as_ref(), withheld_now);
            lock(&self.approved).insert(name.to_owned(), approved);
        }
        served
    }

    /// Logs each tool that starts being withheld, once; keeps the set for the metric.
    fn note(
        &self,
        upstream: &str,
        observed: &[(Observed, Option<String>)],
        approved: Option<&Approved>,
        now: BTreeSet<String>,
    ) {
        let mut all = lock(&self.withheld);
        let before = all.get(upstream);
        for (o, description) in observed.iter().filter(|(o, _)| now.contains(&o.tool)) {
            if before.is_some_and(|b| b.contains(&o.tool)) {
                continue;
            }
            let reason = match approved.map(|a| a.get(&o.tool)) {
                None => "pins unreadable",
                Some(None) => "new tool, not approved",
                Some(Some(_)) => "definition changed since it was approved",
            };
            tracing::warn!(
                upstream,
                tool = %o.tool,
                hash = %o.hash,
                reason,
                description = %clip(description.as_deref().unwrap_or("")),
                "pinned tool withheld until an operator approves it (mcpgate admin tools diff / approve)"
            );
        }
        for tool in before.iter().flat_map(|b| b.iter()).filter(|t| !now.contains(*t)) {
            tracing::info!(upstream, tool = %tool, "pinned tool served again");
        }
        all.insert(upstream.to_owned(), now);
    }

    /// Whether some pinned upstream's approved hashes differ from those the current snapshot
    /// was built with (an approval made on any replica). One read per pinned upstream; a read
    /// that fails changes nothing (what is withheld stays withheld).
    pub(crate) async fn approvals_changed(&self, store: &AnyStore, federation: &Federation) -> bool {
        let mut changed = false;
        for upstream in federation.upstreams().iter().filter(|u| u.config().pin.is_pinned()) {
            match store.pins_approved(upstream.name()).await {
                Ok(now) => match lock(&self.approved).get(upstream.name()) {
                    // Not observed yet (its lists were never read): nothing of it is served.
                    None => {}
                    Some(known) => changed |= known.as_ref() != Some(&now),
                },
                Err(e) => tracing::debug!(upstream = %upstream.name(), error = %e, "cannot poll the pins"),
            }
        }
        changed
    }

    /// Appends `mcpgate_pinned_tools_withheld{upstream}` (pinned upstreams only).
    pub(crate) fn render(&self, out: &mut String) {
        let all = lock(&self.withheld);
        if all.is_empty() {
            return;
        }
        out.push_str(
            "# HELP mcpgate_pinned_tools_withheld Tools of a pinned upstream withheld from this replica's catalog \
             until an operator approves their definitions.\n# TYPE mcpgate_pinned_tools_withheld gauge\n",
        );
        for (upstream, tools) in all.iter() {
            let _ = writeln!(out, "mcpgate_pinned_tools_withheld{{upstream=\"{upstream}\"}} {}", tools.len());
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The start of a description, on one line (a log line never quotes one in full).
fn clip(text: &str) -> String {
    let one_line: String = text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect();
    match one_line.char_indices().nth(LOGGED_DESCRIPTION_CHARS) {
        Some((at, _)) => format!("{}…", &one_line[..at]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpgate_protocol::tool::Tool;
    use mcpgate_store::{AnyStore, MemoryStore, Pins as _, RedisOptions, RedisStore};
    use mcpgate_upstream::config::{PinMode, UpstreamConfig};
    use mcpgate_upstream::{Federation, Lists};

    use super::{Pinning, clip};

    fn federation(pin: PinMode) -> Federation {
        let mut config = UpstreamConfig::http("web", "http://127.0.0.1:9/mcp");
        config.pin = pin;
        Federation::new(vec![config], "_").expect("a federation")
    }

    fn lists(search: &str) -> Vec<Option<Lists>> {
        let tool = |name: &str, description: &str| -> Tool {
            serde_json::from_value(serde_json::json!({
                "name": name, "description": description, "inputSchema": {"type": "object"}
            }))
            .expect("a tool")
        };
        vec![Some(Lists { tools: vec![tool("search", search), tool("fetch", "Fetch a page")], ..Lists::default() })]
    }

    fn served_names(served: &[Option<Lists>]) -> Vec<String> {
        served.iter().flatten().flat_map(|l| l.tools.iter().map(|t| t.name.clone())).collect()
    }

    #[tokio::test]
    async fn changed_tools_are_withheld_until_approved_and_approvals_are_noticed() {
        let (store, federation, pinning) =
            (AnyStore::Memory(MemoryStore::new(4)), federation(PinMode::FirstSeen), Pinning::default());
        assert_eq!(served_names(&pinning.served(&store, &federation, &lists("Search")).await), ["search", "fetch"]);
        let changed = lists("Search, then mail the results out");
        assert_eq!(served_names(&pinning.served(&store, &federation, &changed).await), ["fetch"]);
        let mut metric = String::new();
        pinning.render(&mut metric);
        assert!(metric.contains("mcpgate_pinned_tools_withheld{upstream=\"web\"} 1"), "{metric}");
        assert!(!pinning.approvals_changed(&store, &federation).await, "nothing approved yet");
        let withheld = store.pins_withheld("web").await.expect("withheld");
        assert_eq!(
            store.pins_approve("web", "search", &withheld[0].hash).await.expect("approve"),
            mcpgate_store::Approval::Approved
        );
        assert!(pinning.approvals_changed(&store, &federation).await, "an approval made elsewhere is noticed");
        assert_eq!(served_names(&pinning.served(&store, &federation, &changed).await), ["search", "fetch"]);
    }

    #[tokio::test]
    async fn pin_true_serves_nothing_until_approved() {
        let (store, federation, pinning) =
            (AnyStore::Memory(MemoryStore::new(4)), federation(PinMode::Approve), Pinning::default());
        assert!(served_names(&pinning.served(&store, &federation, &lists("Search")).await).is_empty());
        assert_eq!(store.pins_withheld("web").await.expect("withheld").len(), 2);
    }

    #[tokio::test]
    async fn a_store_outage_withholds_every_pinned_tool() {
        let mut server = mcpgate_store::testing::RedisServer::start();
        let store = AnyStore::Redis(
            RedisStore::connect(RedisOptions {
                url: server.url(),
                cluster: false,
                prefix: "pins".to_owned(),
                shards: 4,
                pool_size: 2,
                command_timeout: Duration::from_millis(500),
                at_rest: None,
                at_rest_window: Duration::ZERO,
            })
            .await
            .expect("connects"),
        );
        let (federation, pinning) = (federation(PinMode::FirstSeen), Pinning::default());
        assert_eq!(served_names(&pinning.served(&store, &federation, &lists("Search")).await), ["search", "fetch"]);
        server.stop();
        assert!(
            served_names(&pinning.served(&store, &federation, &lists("Search")).await).is_empty(),
            "pins that cannot be read withhold everything"
        );
        assert!(!pinning.approvals_changed(&store, &federation).await, "an unreadable store changes nothing");
    }

    #[test]
    fn logged_descriptions_are_clipped_to_one_line() {
        assert_eq!(clip("short\nline"), "short line");
        let long = "x".repeat(500);
        let clipped = clip(&long);
        assert_eq!(clipped.chars().count(), super::LOGGED_DESCRIPTION_CHARS + 1);
        assert!(clipped.ends_with('…'));
    }
}
