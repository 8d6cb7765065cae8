//! `server/discover` (2026-07-28): what a modern server supports, cacheable.

use serde::{Deserialize, Serialize};

use crate::capabilities::ServerCapabilities;
use crate::result::{CacheScope, ResultMeta, ResultType};

/// `server/discover` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DiscoverResult {
    /// Every version the server speaks, newest first.
    pub supported_versions: Vec<String>,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Usage hints for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Cache lifetime.
    pub ttl_ms: u64,
    /// Cache scope.
    pub cache_scope: CacheScope,
    /// `"complete"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

crate::impl_mcp_result!(DiscoverResult);
