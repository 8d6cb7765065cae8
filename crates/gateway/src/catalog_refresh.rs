//! Keeps each replica's catalog in step with its upstream servers' lists: read at start-up
//! (an upstream that does not answer contributes the lists it last served, kept in the
//! store), re-read every `federation.list_refresh_secs` (sooner, with backoff, while some
//! upstream's lists were never read) and whenever an upstream announces a change; a change is
//! saved to the store, which advances a generation every replica polls, and announced on the
//! store's change channel (which listen streams on every replica follow, and which makes
//! every replica reload at once rather than at its next poll), so all replicas rebuild from
//! the same lists within moments, without each asking the upstream.
//!
//! A pinned upstream's tools are checked against the approved hashes in the store before each
//! build (see `pinning`), and an approval made on any replica is picked up at the next poll
//! or announcement.
//!
//! Invariant: a snapshot is swapped in whole and only when some list (or approval) changed; an upstream
//! that is down keeps its last known lists (its calls fail fast meanwhile); a change is
//! announced only after this replica's new snapshot is in place.

use std::sync::Arc;
use std::time::Duration;

use mcpgate_store::{AnyStore, Change, EventBus as _, UpstreamLists as _};
use mcpgate_upstream::{Federation, Lists};

use crate::state::AppState;

/// How often a replica checks whether another one saved new lists.
const POLL: Duration = Duration::from_secs(2);

/// How soon an upstream whose lists this replica has never had is asked again; doubled after
/// each round it stays unknown, up to the refresh interval (an upstream that was still
/// starting when the replica did is served within seconds, not a refresh interval later).
const FIRST_RETRY: Duration = Duration::from_secs(1);

/// The wait before the next read of the upstreams.
fn next_read(current: &[Option<Lists>], every: Duration, retry: &mut Duration) -> Duration {
    if current.iter().all(Option::is_some) {
        *retry = FIRST_RETRY;
        return every;
    }
    let wait = (*retry).min(every);
    *retry = retry.saturating_mul(2);
    wait
}

/// The lists to start with: each upstream's own, or the ones it last served (from the store).
pub(crate) async fn initial_lists(federation: &Federation, store: &AnyStore, wait: Duration) -> Vec<Option<Lists>> {
    let read = federation.discover(wait).await;
    let mut lists = Vec::with_capacity(read.len());
    for (upstream, fresh) in federation.upstreams().iter().zip(read) {
        let stored = match store.load_lists(upstream.name()).await {
            Ok(stored) => stored.and_then(|json| serde_json::from_str::<Lists>(&json).ok()),
            Err(e) => {
                tracing::warn!(upstream = %upstream.name(), error = &e as &dyn std::error::Error, "cannot read the stored lists");
                None
            }
        };
        match fresh {
            Some(fresh) => {
                if stored.as_ref() != Some(&fresh) {
                    save(store, upstream.name(), &fresh).await;
                }
                lists.push(Some(fresh));
            }
            None => {
                if stored.is_some() {
                    tracing::info!(upstream = %upstream.name(), "serving the upstream's last known lists until it answers");
                }
                lists.push(stored);
            }
        }
    }
    lists
}

async fn save(store: &AnyStore, upstream: &str, lists: &Lists) {
    let json = match serde_json::to_string(lists) {
        Ok(json) => json,
        Err(e) => return tracing::warn!(upstream, error = &e as &dyn std::error::Error, "lists not serializable"),
    };
    if let Err(e) = store.save_lists(upstream, &json).await {
        tracing::warn!(
            upstream,
            error = &e as &dyn std::error::Error,
            "cannot save the upstream's lists; other replicas learn of them at their next refresh"
        );
    }
}

/// Runs the refresh loop until shutdown begins.
pub(crate) fn spawn(state: AppState, mut current: Vec<Option<Lists>>) {
    if state.federation.is_empty() {
        return;
    }
    let every = Duration::from_secs(state.config.federation.list_refresh_secs);
    let wait = Duration::from_secs(state.config.federation.startup_wait_secs);
    tokio::spawn(async move {
        let federation = Arc::clone(&state.federation);
        let mut generation = state.store.lists_generation().await.unwrap_or(0);
        let mut retry = FIRST_RETRY;
        let mut next_refresh = tokio::time::Instant::now() + next_read(&current, every, &mut retry);
        let mut poll = tokio::time::interval(POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut announced = state.store.changes();
        loop {
            let from_upstreams = tokio::select! {
                () = state.stopping.cancelled() => return,
                () = tokio::time::sleep_until(next_refresh) => true,
                () = federation.any_list_changed() => {
                    tracing::info!("an upstream announced new lists");
                    true
                }
                _ = poll.tick() => false,
                // Another replica's change (or our own, which finds nothing new): check now.
                change = announced.recv() => {
                    if matches!(change, Err(tokio::sync::broadcast::error::RecvError::Closed)) {
                        return;
                    }
                    false
                }
            };
            let mut kinds = Kinds::default();
            let mut changed = if from_upstreams {
                kinds = refresh_from_upstreams(&state, &federation, &mut current, wait).await;
                next_refresh = tokio::time::Instant::now() + next_read(&current, every, &mut retry);
                kinds.any()
            } else {
                match state.store.lists_generation().await {
                    Ok(seen) if seen != generation => {
                        generation = seen;
                        reload_from_store(&state, &federation, &mut current).await
                    }
                    Ok(_) => false,
                    Err(e) => {
                        tracing::debug!(error = &e as &dyn std::error::Error, "cannot poll the lists generation");
                        false
                    }
                }
            };
            // An approval on any replica (announced, or seen at the next poll) is served at once.
            if !from_upstreams && state.pinning.approvals_changed(&state.store, &federation).await {
                tracing::info!("pinned definitions were approved");
                kinds.tools = true;
                changed = true;
            }
            if changed {
                let served = state.pinning.served(&state.store, &federation, &current).await;
                match state.catalog_parts.build(&federation, &served, state.tasks.book()) {
                    Ok(catalog) => {
                        state.catalog.replace(catalog);
                        tracing::info!("catalog rebuilt with the upstreams' new lists");
                        kinds.announce(&state.store).await;
                    }
                    Err(e) => {
                        tracing::warn!(
                            error = &e as &dyn std::error::Error,
                            "the new lists do not make a valid catalog; keeping the current one"
                        )
                    }
                }
            }
        }
    });
}

/// Which kinds of list changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Kinds {
    tools: bool,
    prompts: bool,
    resources: bool,
}

impl Kinds {
    /// What differs between an upstream's old lists and its new ones.
    fn between(old: Option<&Lists>, new: &Lists) -> Self {
        let Some(old) = old else {
            return Self { tools: true, prompts: true, resources: true };
        };
        Self {
            tools: old.tools != new.tools,
            prompts: old.prompts != new.prompts,
            resources: old.resources != new.resources || old.templates != new.templates,
        }
    }

    fn any(self) -> bool {
        self.tools || self.prompts || self.resources
    }

    fn merge(&mut self, other: Self) {
        self.tools |= other.tools;
        self.prompts |= other.prompts;
        self.resources |= other.resources;
    }

    /// Tells every replica's listeners (best effort: lists are re-read on the next poll anyway).
    async fn announce(self, store: &AnyStore) {
        for (changed, change) in [
            (self.tools, Change::ToolsListChanged),
            (self.prompts, Change::PromptsListChanged),
            (self.resources, Change::ResourcesListChanged),
        ] {
            if changed && let Err(e) = store.publish_change(&change).await {
                tracing::warn!(
                    error = &e as &dyn std::error::Error,
                    "could not announce a list change; replicas see it at their next poll"
                );
            }
        }
    }
}

/// Re-reads every upstream; saves and takes what changed. Returns which kinds of list did.
async fn refresh_from_upstreams(
    state: &AppState,
    federation: &Federation,
    current: &mut [Option<Lists>],
    wait: Duration,
) -> Kinds {
    let read = federation.discover(wait).await;
    let mut kinds = Kinds::default();
    for ((upstream, fresh), held) in federation.upstreams().iter().zip(read).zip(current.iter_mut()) {
        if let Some(fresh) = fresh
            && held.as_ref() != Some(&fresh)
        {
            save(&state.store, upstream.name(), &fresh).await;
            kinds.merge(Kinds::between(held.as_ref(), &fresh));
            *held = Some(fresh);
        }
    }
    kinds
}

/// Takes the lists another replica saved. True when anything changed.
async fn reload_from_store(state: &AppState, federation: &Federation, current: &mut [Option<Lists>]) -> bool {
    let mut changed = false;
    for (upstream, held) in federation.upstreams().iter().zip(current.iter_mut()) {
        match state.store.load_lists(upstream.name()).await {
            Ok(Some(json)) => match serde_json::from_str::<Lists>(&json) {
                Ok(stored) if held.as_ref() != Some(&stored) => {
                    *held = Some(stored);
                    changed = true;
                }
                Ok(_) => {}
                // Text by design: the upstream's status (`/upstreams`) shows it as it is.
                Err(e) => federation.note_list_error(upstream.name(), format!("stored lists unreadable: {e}")),
            },
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(upstream = %upstream.name(), error = &e as &dyn std::error::Error, "cannot read the stored lists")
            }
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcpgate_upstream::Lists;

    use super::{FIRST_RETRY, next_read};

    #[test]
    fn unread_upstreams_are_retried_with_backoff_up_to_the_refresh_interval() {
        let every = Duration::from_secs(5);
        let mut retry = FIRST_RETRY;
        let missing = [Some(Lists::default()), None];
        let waits: Vec<u64> = (0..5).map(|_| next_read(&missing, every, &mut retry).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 5, 5]);
        assert_eq!(next_read(&[Some(Lists::default())], every, &mut retry), every);
        assert_eq!(retry, FIRST_RETRY, "backoff starts over once every upstream was read");
    }
}
