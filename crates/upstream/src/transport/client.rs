//! The HTTP client of an HTTP upstream (Streamable HTTP or legacy HTTP+SSE) and the
//! credentials it sends: the configured headers, and a caller's token as `Bearer`.
//!
//! Invariants: no redirect is followed (it could carry the credentials elsewhere); every
//! credential header is marked sensitive, so it never appears in debug output.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::config::UpstreamConfig;
use crate::error::{UpstreamError, unlocated};
use crate::tls::install_tls_provider;

/// `Bearer <token>`, marked sensitive (never in debug output); `None` for a token that cannot
/// be a header value (the exchange accepts only visible ASCII, so this should not happen).
pub(super) fn bearer_header(token: &crate::token_cache::UpstreamToken) -> Option<HeaderValue> {
    let mut value = HeaderValue::try_from(format!("Bearer {}", token.expose())).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The HTTP client of an upstream (its pool sized to `max_concurrency`, no redirects: a
/// redirect could carry its credentials elsewhere) and its configured headers, marked
/// sensitive so they never appear in debug output.
pub(super) fn client_for(config: &UpstreamConfig) -> Result<(reqwest::Client, HeaderMap), UpstreamError> {
    install_tls_provider();
    let bad = |key: String, problem: &str| UpstreamError::Config {
        upstream: config.name.clone(),
        key,
        problem: problem.to_owned(),
        source: None,
    };
    let mut headers = HeaderMap::new();
    for (name, value) in &config.headers {
        let header = HeaderName::try_from(name.as_str())
            .map_err(|_| bad(format!("headers.{name}"), "not a valid header name"))?;
        let mut value = HeaderValue::try_from(value.as_str())
            .map_err(|_| bad(format!("headers.{name}"), "not a valid header value"))?;
        value.set_sensitive(true);
        headers.insert(header, value);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout())
        .pool_max_idle_per_host(usize::try_from(config.max_concurrency).unwrap_or(64))
        .pool_idle_timeout(Duration::from_secs(60))
        .tcp_nodelay(true)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| UpstreamError::Config {
            upstream: config.name.clone(),
            key: "url".to_owned(),
            problem: "cannot build an HTTP client".to_owned(),
            source: Some(unlocated(e)),
        })?;
    Ok((client, headers))
}
