//! One pub/sub connection per replica, subscribed to the event channels of the tasks that
//! local code waits on, fanning messages out through the hub.
//!
//! Invariants: `subscribe` returns only once Redis confirmed the channel subscription, so an
//! event published by any later transition is delivered; after a reconnect every channel is
//! subscribed again and every local subscriber is told to resync (events published while
//! disconnected are lost, so waiters read their task again). The catalog change channel is
//! subscribed on every connection, before anything else.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;
use redis::Client;
use tokio::sync::{mpsc, oneshot};

use super::keys::Keys;
use super::record::parse_status;
use crate::error::StoreError;
use crate::events::{Hub, Subscription, Watcher};
use crate::model::{TaskEvent, TaskId};

enum Command {
    Subscribe(String, oneshot::Sender<Result<(), StoreError>>),
    Unsubscribe(TaskId),
}

/// Handle to the subscriber task.
pub(super) struct Subscriber {
    hub: Hub,
    keys: Keys,
    commands: mpsc::UnboundedSender<Command>,
    timeout: Duration,
}

impl Subscriber {
    /// Starts the subscriber task (it connects on its own and keeps reconnecting, moving to
    /// the next of `clients` after a failure: a cluster's nodes all carry every message).
    pub(super) fn start(clients: Vec<Client>, keys: Keys, hub: Hub, timeout: Duration) -> Arc<Self> {
        let (commands, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(clients, keys.clone(), hub.clone(), rx, timeout));
        Arc::new(Self { hub, keys, commands, timeout })
    }

    /// Subscribes to a task's events; ready (confirmed by Redis) when it returns.
    pub(super) async fn subscribe(self: &Arc<Self>, id: &TaskId) -> Result<Subscription, StoreError> {
        let (subscription, _) = self.hub.join(id, self.clone());
        let (ack, confirmed) = oneshot::channel();
        self.commands
            .send(Command::Subscribe(self.keys.channel(id), ack))
            .map_err(|_| StoreError::Unavailable { detail: "event subscriber stopped".to_owned() })?;
        let millis = u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX);
        match tokio::time::timeout(self.timeout, confirmed).await {
            Ok(Ok(Ok(()))) => Ok(subscription),
            Ok(Ok(Err(e))) => Err(e),
            Ok(Err(_)) => Err(StoreError::Unavailable { detail: "event subscriber stopped".to_owned() }),
            Err(_) => Err(StoreError::Timeout { millis }),
        }
    }
}

impl Subscriber {
    /// A feed of catalog changes from every replica.
    pub(super) fn changes(&self) -> tokio::sync::broadcast::Receiver<crate::Change> {
        self.hub.changes()
    }
}

impl Watcher for Subscriber {
    fn unwatch(&self, id: &TaskId) {
        let _ = self.commands.send(Command::Unsubscribe(id.clone()));
    }
}

/// How often an idle subscriber connection is checked with `PING`: a connection that died
/// silently would otherwise stop delivering events without any error.
const PING_EVERY: Duration = Duration::from_secs(10);

async fn run(
    clients: Vec<Client>,
    keys: Keys,
    hub: Hub,
    mut commands: mpsc::UnboundedReceiver<Command>,
    timeout: Duration,
) {
    let mut backoff = Duration::from_millis(100);
    let mut next = 0;
    loop {
        let Some(client) = clients.get(next % clients.len().max(1)) else { return };
        match serve(client, &keys, &hub, &mut commands, timeout).await {
            Served::Stopped => return,
            Served::Lost { healthy } => {
                if healthy {
                    backoff = Duration::from_millis(100);
                }
                next += 1;
            }
        }
        tracing::warn!("event subscriber lost its Redis connection; reconnecting");
        if !pause_failing(&mut commands, backoff).await {
            return;
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

/// Connects, subscribes to every watched channel, then serves commands and messages until the
/// connection fails. Every call on the connection is bounded by `timeout`.
async fn serve(
    client: &Client,
    keys: &Keys,
    hub: &Hub,
    commands: &mut mpsc::UnboundedReceiver<Command>,
    timeout: Duration,
) -> Served {
    let bounded = |what: &'static str| {
        move |r: Result<redis::RedisResult<()>, tokio::time::error::Elapsed>| match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(StoreError::from(e)),
            Err(_) => Err(StoreError::Unavailable { detail: format!("{what} timed out") }),
        }
    };
    let pubsub = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "event subscriber cannot connect to Redis");
            return Served::Lost { healthy: false };
        }
        Err(_) => {
            tracing::warn!("event subscriber connect timed out");
            return Served::Lost { healthy: false };
        }
    };
    let (mut sink, mut stream) = pubsub.split();
    let changes = keys.changes_channel();
    if bounded("subscribe")(tokio::time::timeout(timeout, sink.subscribe(&changes)).await).is_err() {
        return Served::Lost { healthy: false };
    }
    let mut subscribed: HashSet<String> = HashSet::new();
    for id in hub.watched() {
        let channel = keys.channel(&id);
        if bounded("subscribe")(tokio::time::timeout(timeout, sink.subscribe(&channel)).await).is_err() {
            return Served::Lost { healthy: false };
        }
        subscribed.insert(channel);
    }
    // Whatever happened while we were away was not delivered.
    hub.resync_all();
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ping.reset();
    loop {
        tokio::select! {
            command = commands.recv() => match command {
                None => return Served::Stopped,
                Some(Command::Subscribe(channel, ack)) => {
                    if subscribed.contains(&channel) {
                        let _ = ack.send(Ok(()));
                        continue;
                    }
                    match bounded("subscribe")(tokio::time::timeout(timeout, sink.subscribe(&channel)).await) {
                        Ok(()) => {
                            subscribed.insert(channel);
                            let _ = ack.send(Ok(()));
                        }
                        Err(e) => {
                            let _ = ack.send(Err(e));
                            return Served::Lost { healthy: true };
                        }
                    }
                }
                Some(Command::Unsubscribe(id)) => {
                    // A new local subscriber may have arrived since the last one left.
                    if hub.is_watched(&id) {
                        continue;
                    }
                    let channel = keys.channel(&id);
                    if subscribed.remove(&channel)
                        && bounded("unsubscribe")(tokio::time::timeout(timeout, sink.unsubscribe(&channel)).await).is_err()
                    {
                        return Served::Lost { healthy: true };
                    }
                }
            },
            message = stream.next() => match message {
                None => return Served::Lost { healthy: true },
                Some(message) => {
                    if message.get_channel_name() == changes {
                        let payload: String = message.get_payload().unwrap_or_default();
                        if let Some(change) = crate::Change::decode(&payload) {
                            hub.deliver_change(change);
                        }
                        continue;
                    }
                    let Some(id) = keys.task_of_channel(message.get_channel_name()) else { continue };
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

/// Waits `pause` before reconnecting; subscribes arriving meanwhile fail at once rather than
/// time out. Returns false when the store is gone.
async fn pause_failing(commands: &mut mpsc::UnboundedReceiver<Command>, pause: Duration) -> bool {
    let until = tokio::time::Instant::now() + pause;
    loop {
        tokio::select! {
            () = tokio::time::sleep_until(until) => return true,
            command = commands.recv() => match command {
                None => return false,
                Some(Command::Subscribe(_, ack)) => {
                    let _ = ack.send(Err(StoreError::Unavailable { detail: "event subscriber reconnecting".to_owned() }));
                }
                // Nothing is subscribed while disconnected; the reconnect subscribes what is watched.
                Some(Command::Unsubscribe(_)) => {}
            },
        }
    }
}
