//! Params of list methods and of methods that carry nothing but `_meta`.

use serde::{Deserialize, Serialize};

use crate::meta::RequestMeta;

/// Params of `*/list` methods.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaginatedParams {
    /// Opaque cursor from a previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// Params of a request whose only member is `_meta` (`server/discover`, `ping`, and any
/// method this server does not know, so era rules can still be applied to it).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MetaParams {
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}
