//! Content negotiation and body intake: `Content-Type` must be JSON, `Accept` must allow JSON
//! or SSE, and the body is read up to the configured limit.
//!
//! Invariants: no more than `http.body_limit_bytes` of one body and no more than
//! `http.max_buffered_body_bytes` across all bodies are buffered at once, and no body read
//! waits longer than `http.body_timeout_secs`.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::GatewayError;

/// What the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Accept {
    /// `application/json` (or a wildcard covering it).
    pub json: bool,
    /// `text/event-stream`, listed explicitly (wildcards do not imply it).
    pub sse: bool,
}

impl Accept {
    /// Parses `Accept`; absent means JSON.
    pub(crate) fn from_headers(headers: &HeaderMap) -> Result<Self, GatewayError> {
        let Some(value) = headers.get(header::ACCEPT) else {
            return Ok(Self { json: true, sse: false });
        };
        let mut accept = Self { json: false, sse: false };
        for range in value.to_str().unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim();
            let refused = parts.any(|p| {
                let p = p.trim();
                p.strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
            });
            if refused {
                continue;
            }
            // Compared without folding a copy: media types are case-insensitive.
            let is = |name: &str| media.eq_ignore_ascii_case(name);
            if is("application/json") || is("application/*") || media == "*/*" {
                accept.json = true;
            } else if is("text/event-stream") {
                accept.sse = true;
            }
        }
        if accept.json || accept.sse { Ok(accept) } else { Err(GatewayError::NotAcceptable) }
    }
}

/// Checks that the body is declared as JSON.
pub(crate) fn check_content_type(headers: &HeaderMap) -> Result<(), GatewayError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim());
    match media {
        Some(m) if m.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(GatewayError::UnsupportedMediaType),
    }
}

/// Limits on reading one body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyLimits {
    /// Largest body.
    pub max_bytes: u64,
    /// Deadline for the whole body.
    pub timeout: Duration,
}

/// A body read within its limits, holding its share of the replica's body budget until dropped.
#[derive(Debug)]
pub(crate) struct ReadBody {
    /// The bytes.
    pub bytes: Bytes,
    _budget: OwnedSemaphorePermit,
}

/// Reads the body, refusing more than `limits.max_bytes` (early, from `Content-Length`, when
/// the client declares it), a client too slow to send it, and any body that would take the
/// replica's buffered bytes past `budget`.
pub(crate) async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limits: BodyLimits,
    budget: &Arc<Semaphore>,
) -> Result<ReadBody, GatewayError> {
    let limit = limits.max_bytes;
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(GatewayError::PayloadTooLarge { limit });
    }
    // Reserve what this body may occupy: its declared size, or the limit when undeclared.
    let reserve = u32::try_from(declared.unwrap_or(limit).max(1)).unwrap_or(u32::MAX);
    let permit = budget.clone().try_acquire_many_owned(reserve).map_err(|_| GatewayError::Overloaded)?;
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match tokio::time::timeout(limits.timeout, limited.collect()).await {
        Err(_) => Err(GatewayError::BodyTimeout),
        Ok(Ok(collected)) => Ok(ReadBody { bytes: collected.to_bytes(), _budget: permit }),
        Ok(Err(e)) if e.downcast_ref::<LengthLimitError>().is_some() => Err(GatewayError::PayloadTooLarge { limit }),
        Ok(Err(source)) => Err(GatewayError::BodyRead { source }),
    }
}
