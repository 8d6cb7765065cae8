//! An HTTP upstream's answer, whichever client carried it: a pooled connection driven by the
//! call itself (plain-`http` POSTs, see `pool`), or the general client (https, proxies, the
//! GET streams). Readers see one head and one stream of body chunks either way.

use bytes::Bytes;
use reqwest::StatusCode;
use reqwest::header::HeaderMap;

use super::pool;
use crate::error::{Cause, unlocated};

/// One answer.
pub(crate) enum Reply<'a> {
    /// From a pooled connection (given back when its body was read to the end).
    Pooled(pool::Answer<'a>),
    /// From the general client.
    General(reqwest::Response),
}

impl Reply<'_> {
    /// Its status.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            Self::Pooled(a) => a.status,
            Self::General(r) => r.status(),
        }
    }

    /// Its headers.
    pub(crate) fn headers(&self) -> &HeaderMap {
        match self {
            Self::Pooled(a) => &a.headers,
            Self::General(r) => r.headers(),
        }
    }

    /// Keeps its connection from serving another request: the answer was not the one asked
    /// for. (The general client's connections are its own to keep; its https answers are
    /// framed per request, but are not shared with a gateway-owned pool either.)
    pub(crate) fn discard(&mut self) {
        if let Self::Pooled(a) = self {
            a.discard();
        }
    }

    /// The next piece of its body, `None` at the end; `Err` is why it broke (no URL).
    pub(crate) async fn chunk(&mut self) -> Result<Option<Bytes>, Cause> {
        match self {
            Self::Pooled(a) => a.chunk().await,
            Self::General(r) => r.chunk().await.map_err(unlocated),
        }
    }
}
