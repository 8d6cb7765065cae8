//! Retrying a request through transient failures (a replica restarting, Redis failing
//! over), with backoff, within a deadline.

use std::time::Duration;

use tokio::time::Instant;

use super::outcome::Failure;
use crate::mcp::{Answer, CallError};

/// Repeats `attempt` while it fails transiently, with backoff, until `within` has passed.
pub(crate) async fn retry<F, Fut>(within: Duration, retried: &mut u32, mut attempt: F) -> Result<Answer, Failure>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Answer, CallError>>,
{
    let deadline = Instant::now() + within;
    let mut backoff = Duration::from_millis(50);
    loop {
        match attempt().await {
            Ok(answer) => return Ok(answer),
            Err(e) if e.transient() && Instant::now() + backoff < deadline => {
                *retried += 1;
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(1));
            }
            Err(e) => return Err(Failure::Call(e)),
        }
    }
}

/// Time left until `deadline`.
pub(super) fn left(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now())
}
