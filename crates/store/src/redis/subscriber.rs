//! One pub/sub connection per replica, subscribed to the event channels of the tasks that
//! local code waits on, fanning messages out through the hub.
//!
//! Invariants: `subscribe` returns only once Redis confirmed the channel subscription, so an
//! event published by any later transition is delivered; after a reconnect every channel is
//! subscribed again and every local subscriber is told to resync (events published while
//! disconnected are lost, so waiters read their task again).

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
    /// Starts the subscriber task (it connects on its own and keeps reconnecting).
    pub(super) fn start(client: Client, keys: Keys, hub: Hub, timeout: Duration) -> Arc<Self> {
        let (commands, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(client, keys.clone(), hub.clone(), rx, timeout));
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

impl Watcher for Subscriber {
    fn unwatch(&self, id: &TaskId) {
        let _ = self.commands.send(Command::Unsubscribe(id.clone()));
    }
}

async fn run(client: Client, keys: Keys, hub: Hub, mut commands: mpsc::UnboundedReceiver<Command>, timeout: Duration) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let pubsub = match tokio::time::timeout(timeout, client.get_async_pubsub()).await {
            Ok(Ok(p)) => p,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "event subscriber cannot connect to Redis; retrying");
                if !drain_failing(&mut commands, &e.to_string()).await {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
            Err(_) => {
                if !drain_failing(&mut commands, "connect timed out").await {
                    return;
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                continue;
            }
        };
        let (mut sink, mut stream) = pubsub.split();
        let mut subscribed: HashSet<String> = HashSet::new();
        let mut healthy = true;
        for id in hub.watched() {
            let channel = keys.channel(&id);
            if sink.subscribe(&channel).await.is_err() {
                healthy = false;
                break;
            }
            subscribed.insert(channel);
        }
        if !healthy {
            continue;
        }
        // Whatever happened while we were away was not delivered.
        hub.resync_all();
        backoff = Duration::from_millis(100);
        loop {
            tokio::select! {
                command = commands.recv() => match command {
                    None => return,
                    Some(Command::Subscribe(channel, ack)) => {
                        if subscribed.contains(&channel) {
                            let _ = ack.send(Ok(()));
                            continue;
                        }
                        match sink.subscribe(&channel).await {
                            Ok(()) => {
                                subscribed.insert(channel);
                                let _ = ack.send(Ok(()));
                            }
                            Err(e) => {
                                let _ = ack.send(Err(e.into()));
                                break;
                            }
                        }
                    }
                    Some(Command::Unsubscribe(id)) => {
                        // A new local subscriber may have arrived since the last one left.
                        if hub.watched().contains(&id) {
                            continue;
                        }
                        let channel = keys.channel(&id);
                        if subscribed.remove(&channel) && sink.unsubscribe(&channel).await.is_err() {
                            break;
                        }
                    }
                },
                message = stream.next() => match message {
                    None => break,
                    Some(message) => {
                        let Some(id) = keys.task_of_channel(message.get_channel_name()) else { continue };
                        let payload: String = message.get_payload().unwrap_or_default();
                        let event = parse_status(&payload).map_or(TaskEvent::Resync, TaskEvent::Status);
                        hub.deliver(&id, event);
                    }
                },
            }
        }
        tracing::warn!("event subscriber lost its Redis connection; reconnecting");
    }
}

/// While disconnected, fails pending subscribes fast instead of letting them time out.
/// Returns false when the store is gone.
async fn drain_failing(commands: &mut mpsc::UnboundedReceiver<Command>, why: &str) -> bool {
    loop {
        match commands.try_recv() {
            Ok(Command::Subscribe(_, ack)) => {
                let _ = ack.send(Err(StoreError::Unavailable { detail: why.to_owned() }));
            }
            Ok(Command::Unsubscribe(_)) => {}
            Err(mpsc::error::TryRecvError::Empty) => return true,
            Err(mpsc::error::TryRecvError::Disconnected) => return false,
        }
    }
}
