//! What every result shares: `resultType`, result `_meta`, cache hints, the empty result.
//!
//! Invariant: `resultType` is discriminated in code (the JSON Schema types it as a plain
//! string); unknown values survive a round trip as [`ResultType::Other`].

use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::implementation::Implementation;
use crate::json::JsonObject;

/// `resultType` of a 2026-07-28 result.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ResultType {
    /// The request finished.
    Complete,
    /// MRTR: the server needs input; retry with `inputResponses`.
    InputRequired,
    /// Tasks extension: the work continues as a task (only on `CreateTaskResult`).
    Task,
    /// A value from an extension this crate does not know.
    Other(String),
}

impl ResultType {
    /// The wire spelling.
    pub fn as_str(&self) -> &str {
        match self {
            Self::Complete => "complete",
            Self::InputRequired => "input_required",
            Self::Task => "task",
            Self::Other(s) => s,
        }
    }
}

impl Serialize for ResultType {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for ResultType {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(match &*s {
            "complete" => Self::Complete,
            "input_required" => Self::InputRequired,
            "task" => Self::Task,
            _ => Self::Other(s.into_owned()),
        })
    }
}

/// `cacheScope` on cacheable results (SEP-2549).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheScope {
    /// May be shared across authorization contexts.
    Public,
    /// Only within the authorization context that fetched it.
    Private,
}

/// The `_meta` object of a result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResultMeta {
    /// Who answered; shared so that stamping it on every result costs no copy.
    #[serde(rename = "io.modelcontextprotocol/serverInfo", default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<Arc<Implementation>>,
    /// Legacy: the task this result belongs to (`tasks/result`).
    #[serde(rename = "io.modelcontextprotocol/related-task", default, skip_serializing_if = "Option::is_none")]
    pub related_task: Option<RelatedTask>,
    /// Any other keys, kept verbatim.
    #[serde(flatten)]
    pub other: JsonObject,
}

impl ResultMeta {
    /// Meta carrying only the server info.
    pub fn server(info: Arc<Implementation>) -> Self {
        Self { server_info: Some(info), related_task: None, other: JsonObject::new() }
    }
}

/// `{taskId}` used by the legacy related-task `_meta` key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RelatedTask {
    /// The related task.
    pub task_id: String,
}

/// A result with no fields of its own (`ping`, `tasks/update`, modern `tasks/cancel`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EmptyResult {
    /// `"complete"` in the modern era, absent in legacy.
    #[serde(rename = "resultType", default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// Implemented by every result type so the gateway can stamp era-specific fields.
pub trait McpResult: Serialize {
    /// Sets `resultType` (modern) or clears it (legacy).
    fn set_result_type(&mut self, result_type: Option<ResultType>);
    /// Sets the result `_meta`.
    fn set_meta(&mut self, meta: Option<ResultMeta>);
}

/// Implements [`McpResult`] for structs with `result_type` and `meta` fields.
#[macro_export]
#[doc(hidden)]
macro_rules! impl_mcp_result {
    ($($t:ty),* $(,)?) => {$(
        impl $crate::result::McpResult for $t {
            fn set_result_type(&mut self, result_type: Option<$crate::result::ResultType>) {
                self.result_type = result_type;
            }
            fn set_meta(&mut self, meta: Option<$crate::result::ResultMeta>) {
                self.meta = meta;
            }
        }
    )*};
}

impl_mcp_result!(EmptyResult);
