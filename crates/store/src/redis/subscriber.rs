//! One pub/sub connection per replica, subscribed once to every task's event channel (one
//! pattern, `<prefix>:events:*`) and to the catalog change channel, fanning messages out
//! through the hub to the local code that waits on a task. Waiting on a task therefore costs
//! no Redis command: no `SUBSCRIBE`/`UNSUBSCRIBE` per run or waiter on the critical path.
//! Every replica receives every task event; one that nobody here waits on is dropped after a
//! map lookup.
//!
//! Invariants: `subscribe` returns only while the pattern subscription is confirmed, so an
//! event published by any later transition is delivered, unless the connection drops; after a
//! reconnect the subscriptions are made again and every local subscriber is told to resync
//! (events published while disconnected are lost, so waiters read their task again). A lost
//! connection retires its node source's resolution, so with Sentinel the reconnect goes to
//! the primary named after a failover.
//!
//! It also keeps the replica's cache of finished task records honest (see `terminal_cache`):
//! a `purged` event drops the task from it, and the cache is served only while the
//! subscriptions are confirmed, and emptied whenever the connection is lost or made again.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::{mpsc, watch};

use super::keys::Keys;
use super::record::parse_status;
use super::sentinel::NodeSource;
use super::terminal_cache::TerminalCache;
use crate::error::StoreError;
use crate::events::{Hub, Subscription, Watcher};
use crate::model::{TaskEvent, TaskId};

/// Handle to the subscriber task.
pub(super) struct Subscriber {
    hub: Hub,
    /// Whether the subscriptions are confirmed on a live connection.
    ready: watch::Receiver<bool>,
    /// Dropped with the store: stops the subscriber task.
    _stop: mpsc::Sender<()>,
    timeout: Duration,
}

impl Subscriber {
    /// Starts the subscriber task (it connects on its own and keeps reconnecting, moving to
    /// the next of `sources` after a failure: a cluster's nodes all carry every message).
    pub(super) fn start(
        sources: Vec<Arc<NodeSource>>,
        keys: Keys,
        hub: Hub,
        terminal: Arc<TerminalCache>,
        timeout: Duration,
    ) -> Arc<Self> {
        let (stop, stopped) = mpsc::channel(1);
        let (ready_tx, ready) = watch::channel(false);
        let listener = Listener { keys, hub: hub.clone(), terminal, ready: ready_tx };
        tokio::spawn(run(sources, listener, stopped, timeout));
        Arc::new(Self { hub, ready, _stop: stop, timeout })
    }

    /// Subscribes to a task's events: joins the local hub (no Redis command) once the
    /// replica's pattern subscription is confirmed, waiting for it at most the command timeout
    /// (it is down only while the subscriber reconnects).
    pub(super) async fn subscribe(self: &Arc<Self>, id: &TaskId) -> Result<Subscription, StoreError> {
        // Joined first: should the connection drop between the check below and an event, the
        // reconnect's resync reaches this subscriber.
        let (subscription, _) = self.hub.join(id, self.clone());
        if *self.ready.borrow() {
            return Ok(subscription);
        }
        let mut ready = self.ready.clone();
        let millis = crate::clock::millis(self.timeout);
        match tokio::time::timeout(self.timeout, ready.wait_for(|r| *r)).await {
            Ok(Ok(_)) => Ok(subscription),
            Ok(Err(_)) => Err(StoreError::unavailable("event subscriber stopped")),
            Err(_) => Err(StoreError::Timeout { millis }),
        }
    }
}

impl Subscriber {
    /// A feed of catalog changes from every replica.
    pub(super) fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::change::Change> {
        self.hub.changes()
    }
}

impl Watcher for Subscriber {
    // The pattern subscription covers every task: nothing to undo when the last waiter leaves.
    fn unwatch(&self, _: &TaskId) {}
}

/// How often an idle subscriber connection is checked with `PING`: a connection that died
/// silently would otherwise stop delivering events without any error.
const PING_EVERY: Duration = Duration::from_secs(10);

/// What the subscriber task delivers to, and tells when it is (not) listening.
struct Listener {
    keys: Keys,
    hub: Hub,
    terminal: Arc<TerminalCache>,
    /// Whether the subscriptions are confirmed on a live connection.
    ready: watch::Sender<bool>,
}

impl Listener {
    /// Confirmed on a new connection, or lost it: either way events may have been missed.
    fn set_ready(&self, ready: bool) {
        self.terminal.set_live(ready);
        self.ready.send_replace(ready);
        if ready {
            self.hub.resync_all();
        }
    }
}

/// The payload `purge.lua` publishes on a task's channel.
const PURGED: &[u8] = b"purged";

async fn run(sources: Vec<Arc<NodeSource>>, listener: Listener, mut stopped: mpsc::Receiver<()>, timeout: Duration) {
    let mut backoff = Duration::from_millis(100);
    let mut next = 0;
    loop {
        let Some(source) = sources.get(next % sources.len().max(1)) else { return };
        let served = match source.node().await {
            Ok(node) => {
                let served = serve(&node.client, &listener, &mut stopped, timeout).await;
                if matches!(served, Served::Lost { .. }) {
                    source.retire(node.epoch);
                }
                served
            }
            Err(e) => {
                tracing::warn!(error = &e as &dyn std::error::Error, "event subscriber cannot find its Redis server");
                Served::Lost { healthy: false }
            }
        };
        listener.set_ready(false);
        match served {
            Served::Stopped => return,
            Served::Lost { healthy } => {
                if healthy {
                    backoff = Duration::from_millis(100);
                }
                next += 1;
            }
        }
        tracing::warn!("event subscriber lost its Redis connection; reconnecting");
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            _ = stopped.recv() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// How one connection ended.
enum Served {
    /// The store is gone.
    Stopped,
    /// The connection failed; `healthy` if it had been fully set up first.
    Lost { healthy: bool },
}

/// Connects, subscribes to the change channel and the task event pattern, says it is ready,
/// then delivers messages until the connection fails. Every call on the connection is bounded
/// by `timeout`.
async fn serve(
    client: &redis::Client,
    listener: &Listener,
    stopped: &mut mpsc::Receiver<()>,
    timeout: Duration,
) -> Served {
    let (keys, hub) = (&listener.keys, &listener.hub);
    let pubsub = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            tracing::warn!(error = &e as &dyn std::error::Error, "event subscriber cannot connect to Redis");
            return Served::Lost { healthy: false };
        }
        Err(_) => {
            tracing::warn!("event subscriber connect timed out");
            return Served::Lost { healthy: false };
        }
    };
    let (mut sink, mut stream) = pubsub.split();
    let changes = keys.changes_channel();
    let subscribed = async {
        sink.subscribe(&changes).await?;
        sink.psubscribe(keys.events_pattern()).await
    };
    match tokio::time::timeout(timeout, subscribed).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(error = &e as &dyn std::error::Error, "event subscriber cannot subscribe");
            return Served::Lost { healthy: false };
        }
        Err(_) => return Served::Lost { healthy: false },
    }
    // Whatever happened while we were away was not delivered.
    listener.set_ready(true);
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.reset();
    loop {
        tokio::select! {
            _ = stopped.recv() => return Served::Stopped,
            message = stream.next() => match message {
                None => return Served::Lost { healthy: true },
                Some(message) => {
                    let channel = message.get_channel_name();
                    if channel == changes {
                        let payload: String = message.get_payload().unwrap_or_default();
                        if let Some(change) = crate::change::Change::decode(&payload) {
                            hub.deliver_change(change);
                        }
                        continue;
                    }
                    let Some(id) = keys.task_of_channel(channel) else { continue };
                    if message.get_payload_bytes() == PURGED {
                        listener.terminal.invalidate(&id);
                    }
                    // Most events are for tasks nobody here waits on: skip decoding them.
                    if !hub.is_watched(&id) {
                        continue;
                    }
                    let payload: String = message.get_payload().unwrap_or_default();
                    let event = parse_status(&payload).map_or(TaskEvent::Resync, TaskEvent::Status);
                    hub.deliver(&id, event);
                }
            },
            _ = ping.tick() => {
                let pong = tokio::time::timeout(timeout, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return Served::Lost { healthy: true };
                }
            }
        }
    }
}
