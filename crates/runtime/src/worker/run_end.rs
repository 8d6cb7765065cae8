//! How the request that created a task hears, on the replica that runs it, that the run's
//! outcome is stored: a one-shot local signal from the worker (no read of the store), so a
//! task that ends within moments of its creation can be answered with its outcome.
//!
//! Invariant: the signal is sent only once the store recorded the outcome (`Settled::Done`,
//! after every retry and replica acknowledgement the write needs), so whatever the creator
//! answers with is what any later read of the task finds (a run stopped by shutdown whose
//! tool may not run again is stored as failed, "interrupted", and tells that); a run that
//! ends any other way (handed back, its lease lost, its write failed) sends nothing, and its
//! receiver reads `None`. The outcome is moved to the receiver, never copied.

use tokio::sync::oneshot;

use mcpgate_protocol::ErrorObject;
use mcpgate_protocol::tool::CallToolResult;

/// How a run ended, as recorded.
#[derive(Debug)]
pub enum RunEnd {
    /// `completed` with this result (a tool error, `isError: true`, too), as stored: without
    /// `resultType` and `_meta`, which each era's reply adds.
    Completed(Box<CallToolResult>),
    /// `failed` with this JSON-RPC error, as stored.
    Failed(ErrorObject),
    /// `input_required`: the task waits for its client's answers.
    Parked,
}

/// The receiving end, given to whoever created the task.
#[derive(Debug)]
pub struct RunWatch(oneshot::Receiver<RunEnd>);

impl RunWatch {
    /// How the run ended, once its outcome is stored; `None` when it ended without one
    /// recorded by this run (see the module docs).
    pub async fn ended(self) -> Option<RunEnd> {
        self.0.await.ok()
    }
}

/// The sending end, carried by the run.
#[derive(Debug, Default)]
pub(super) struct Teller(Option<oneshot::Sender<RunEnd>>);

impl Teller {
    /// A pair for a run whose creator listens.
    pub(super) fn pair() -> (Self, RunWatch) {
        let (tx, rx) = oneshot::channel();
        (Self(Some(tx)), RunWatch(rx))
    }

    /// Tells the creator how the run ended (call only once the store recorded it).
    pub(super) fn tell(&mut self, end: RunEnd) {
        if let Some(tx) = self.0.take() {
            // The creator may have left (its window passed, or the client went away).
            let _ = tx.send(end);
        }
    }
}
