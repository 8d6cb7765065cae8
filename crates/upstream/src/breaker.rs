//! The circuit breaker of one upstream: after `failures` consecutive health failures
//! (unreachable, timed out, connection lost, garbage) calls fail at once for a cool-down;
//! then one probe call goes through, and its outcome closes or re-opens the circuit. An
//! exchange with the upstream outside the calls (the list refresh's handshake or
//! `server/discover`) that got an answer closes it too: the upstream is back, and calls need
//! not wait out the cool-down for it.
//!
//! Invariant: while open, no call reaches the upstream; while half-open, exactly one does.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

use crate::error::UpstreamError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Closed { failures: u32 },
    Open { until: Instant, failures: u32 },
    HalfOpen { failures: u32 },
}

/// The breaker's state, for status and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    /// Calls flow.
    Closed,
    /// Calls fail fast.
    Open,
    /// One probe call is in flight.
    HalfOpen,
}

impl BreakerState {
    /// A label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Closed => "closed",
            Self::Open => "open",
            Self::HalfOpen => "half_open",
        }
    }
}

/// A circuit breaker.
#[derive(Debug)]
pub(crate) struct Breaker {
    threshold: u32,
    cooldown: Duration,
    state: Mutex<State>,
}

/// Permission to make one call; report its outcome with [`Breaker::record`].
#[derive(Debug)]
pub(crate) struct Ticket {
    probe: bool,
}

impl Breaker {
    pub(crate) fn new(threshold: u32, cooldown: Duration) -> Self {
        Self { threshold, cooldown, state: Mutex::new(State::Closed { failures: 0 }) }
    }

    /// Lets a call through, or says why not.
    pub(crate) fn admit(&self) -> Result<Ticket, UpstreamError> {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match *state {
            State::Closed { .. } => Ok(Ticket { probe: false }),
            State::Open { until, failures } if Instant::now() >= until => {
                *state = State::HalfOpen { failures };
                Ok(Ticket { probe: true })
            }
            State::Open { until, failures } => Err(UpstreamError::CircuitOpen {
                failures,
                retry_in_secs: until.saturating_duration_since(Instant::now()).as_secs().max(1),
            }),
            State::HalfOpen { failures } => Err(UpstreamError::CircuitOpen { failures, retry_in_secs: 1 }),
        }
    }

    /// Records how an admitted call ended (`healthy`: it got an answer, even an error answer).
    pub(crate) fn record(&self, ticket: Ticket, healthy: bool) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *state = match (*state, healthy) {
            (_, true) => State::Closed { failures: 0 },
            (State::Closed { failures }, false) if failures + 1 >= self.threshold => {
                State::Open { until: Instant::now() + self.cooldown, failures: failures + 1 }
            }
            (State::Closed { failures }, false) => State::Closed { failures: failures + 1 },
            (State::HalfOpen { failures }, false) if ticket.probe => {
                State::Open { until: Instant::now() + self.cooldown, failures: failures + 1 }
            }
            (other, false) => other,
        };
    }

    /// Records that the upstream answered an exchange made outside the calls: an open or
    /// half-open circuit closes (a probe still in flight then records into the closed state).
    pub(crate) fn reached(&self) {
        let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !matches!(*state, State::Closed { .. }) {
            *state = State::Closed { failures: 0 };
        }
    }

    /// Gives an admitted call's ticket back without an outcome (it was cancelled).
    pub(crate) fn abandon(&self, ticket: Ticket) {
        if ticket.probe {
            let mut state = self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let State::HalfOpen { failures } = *state {
                *state = State::Open { until: Instant::now(), failures };
            }
        }
    }

    pub(crate) fn state(&self) -> BreakerState {
        match *self.state.lock().unwrap_or_else(std::sync::PoisonError::into_inner) {
            State::Closed { .. } => BreakerState::Closed,
            State::Open { .. } => BreakerState::Open,
            State::HalfOpen { .. } => BreakerState::HalfOpen,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_probe_lets_the_next_call_probe() {
        let b = Breaker::new(1, Duration::from_secs(10));
        let t = b.admit().unwrap();
        b.record(t, false);
        tokio::time::advance(Duration::from_secs(11)).await;
        let probe = b.admit().unwrap();
        b.abandon(probe);
        assert!(b.admit().is_ok(), "a dropped probe must not leave the breaker half-open for good");
    }

    #[tokio::test(start_paused = true)]
    async fn an_answered_exchange_outside_the_calls_closes_an_open_breaker() {
        let b = Breaker::new(1, Duration::from_secs(600));
        let t = b.admit().unwrap();
        b.record(t, false);
        assert_eq!(b.state(), BreakerState::Open);
        b.reached();
        assert_eq!(b.state(), BreakerState::Closed);
        assert!(b.admit().is_ok(), "calls flow at once, not after the cool-down");
    }

    #[tokio::test(start_paused = true)]
    async fn opens_probes_and_closes() {
        let b = Breaker::new(2, Duration::from_secs(10));
        for _ in 0..2 {
            let t = b.admit().unwrap();
            b.record(t, false);
        }
        assert_eq!(b.state(), BreakerState::Open);
        assert!(matches!(b.admit(), Err(UpstreamError::CircuitOpen { failures: 2, .. })));
        tokio::time::advance(Duration::from_secs(11)).await;
        let probe = b.admit().unwrap();
        assert!(b.admit().is_err(), "one probe at a time");
        b.record(probe, false);
        assert_eq!(b.state(), BreakerState::Open);
        tokio::time::advance(Duration::from_secs(11)).await;
        let probe = b.admit().unwrap();
        b.record(probe, true);
        assert_eq!(b.state(), BreakerState::Closed);
        let t = b.admit().unwrap();
        b.record(t, false);
        assert_eq!(b.state(), BreakerState::Closed, "one failure is below the threshold");
    }
}
