//! Content negotiation and body intake: `Content-Type` must be JSON, `Accept` must allow JSON
//! or SSE, and the body is read up to the configured limit.
//!
//! Invariant: no more than `limit` bytes of a body are ever buffered.

use axum::body::Body;
use axum::http::{HeaderMap, header};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};

use crate::error::GatewayError;

/// What the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accept {
    /// `application/json` (or a wildcard covering it).
    pub json: bool,
    /// `text/event-stream`, listed explicitly (wildcards do not imply it).
    pub sse: bool,
}

impl Accept {
    /// Parses `Accept`; absent means JSON.
    pub fn from_headers(headers: &HeaderMap) -> Result<Self, GatewayError> {
        let Some(value) = headers.get(header::ACCEPT) else {
            return Ok(Self { json: true, sse: false });
        };
        let mut accept = Self { json: false, sse: false };
        for range in value.to_str().unwrap_or("").split(',') {
            let mut parts = range.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let refused = parts.any(|p| {
                let p = p.trim();
                p.strip_prefix("q=").is_some_and(|q| q.trim().parse::<f32>().is_ok_and(|q| q <= 0.0))
            });
            if refused {
                continue;
            }
            match media.as_str() {
                "application/json" | "application/*" | "*/*" => accept.json = true,
                "text/event-stream" => accept.sse = true,
                _ => {}
            }
        }
        if accept.json || accept.sse { Ok(accept) } else { Err(GatewayError::NotAcceptable) }
    }
}

/// Checks that the body is declared as JSON.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), GatewayError> {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.split(';').next().unwrap_or("").trim());
    match media {
        Some(m) if m.eq_ignore_ascii_case("application/json") => Ok(()),
        _ => Err(GatewayError::UnsupportedMediaType),
    }
}

/// Reads the body, refusing more than `limit` bytes (early, from `Content-Length`, when the
/// client declares it).
pub async fn read_body(headers: &HeaderMap, body: Body, limit: u64) -> Result<Bytes, GatewayError> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(GatewayError::PayloadTooLarge { limit });
    }
    let limited = Limited::new(body, usize::try_from(limit).unwrap_or(usize::MAX));
    match limited.collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(GatewayError::PayloadTooLarge { limit }),
        Err(e) => Err(GatewayError::BodyRead { detail: e.to_string() }),
    }
}
