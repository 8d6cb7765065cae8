//! Tools: the `Tool` descriptor, `tools/list` and `tools/call` of both eras.
//!
//! Invariant: `execution` (legacy `taskSupport`) is only rendered to legacy readers; the
//! modern `Tool` has no such member.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::content::ContentBlock;
use crate::implementation::Icon;
use crate::input::RawInputResponses;
use crate::json::JsonObject;
use crate::meta::RequestMeta;
use crate::pagination::{ListResult, Listed};
use crate::relayed::RawMembers;
use crate::result::{ResultMeta, ResultType};
use crate::task::TaskMetadata;

/// A tool the server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Unique name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// What the tool does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema (2020-12 by default) of the arguments; `type: "object"` at the root.
    pub input_schema: JsonObject,
    /// JSON Schema of `structuredContent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<JsonObject>,
    /// Behaviour hints.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Legacy 2025-11-25 task support; omitted for modern readers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub execution: Option<ToolExecution>,
    /// Icons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Extension metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Hints about a tool's behaviour (never trusted for security).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// May perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// Interacts with an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// Legacy `execution` member of a tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecution {
    /// Whether the tool may or must be called as a task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_support: Option<TaskSupport>,
}

/// Legacy `execution.taskSupport` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Never as a task (the default when absent).
    Forbidden,
    /// Either way.
    Optional,
    /// Only as a task.
    Required,
}

/// `tools/call` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolParams {
    /// The tool to call.
    pub name: String,
    /// Arguments matching the tool's input schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<JsonObject>,
    /// MRTR answers to the previous round's `inputRequests` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_responses: Option<RawInputResponses>,
    /// MRTR state echoed from the previous round (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// Legacy task augmentation; kept raw because the modern era must ignore it as an
    /// unknown field rather than reject a malformed value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

impl CallToolParams {
    /// Parses the legacy `task` member; `Err` when present but malformed.
    pub fn legacy_task(&self) -> Result<Option<TaskMetadata>, serde_json::Error> {
        self.task.as_ref().map(TaskMetadata::deserialize).transpose()
    }
}

/// `tools/call` result.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// Unstructured result.
    pub content: Vec<ContentBlock>,
    /// Structured result matching the output schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// The tool failed (a tool-level error the model can see, not a protocol error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// `"complete"` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
    /// A result relayed from another server: its members as sent, written instead of
    /// `content` and `structuredContent` (which are then empty).
    #[serde(skip)]
    pub relayed: Option<RawMembers>,
}

impl Serialize for CallToolResult {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let mut map = serializer.serialize_map(None)?;
        match &self.relayed {
            Some(members) => {
                for (name, value) in &members.0 {
                    map.serialize_entry(name, value)?;
                }
            }
            None => {
                map.serialize_entry("content", &self.content)?;
                if let Some(structured) = &self.structured_content {
                    map.serialize_entry("structuredContent", structured)?;
                }
            }
        }
        if let Some(is_error) = self.is_error {
            map.serialize_entry("isError", &is_error)?;
        }
        if let Some(result_type) = &self.result_type {
            map.serialize_entry("resultType", result_type)?;
        }
        if let Some(meta) = &self.meta {
            map.serialize_entry("_meta", meta)?;
        }
        map.end()
    }
}

impl CallToolResult {
    /// A result relayed as another server sent it (see [`RawMembers::split`]).
    pub fn relayed(members: RawMembers, is_error: Option<bool>) -> Self {
        Self { is_error, relayed: Some(members), ..Self::default() }
    }

    /// A successful result with these content blocks.
    pub fn success(content: Vec<ContentBlock>) -> Self {
        Self { content, ..Self::default() }
    }

    /// A tool-level error (`isError: true`) with a text explanation.
    pub fn error(message: impl Into<String>) -> Self {
        Self { content: vec![ContentBlock::text(message)], is_error: Some(true), ..Self::default() }
    }
}

/// `tools/list` result: a page of tools.
pub type ListToolsResult = ListResult<Tool>;

impl Listed for Tool {
    const MEMBER: &'static str = "tools";
}

crate::impl_mcp_result!(CallToolResult);
