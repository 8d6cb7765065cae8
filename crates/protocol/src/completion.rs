//! Argument completion (`completion/complete`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::meta::RequestMeta;
use crate::result::{ResultMeta, ResultType};

/// At most this many values may be returned.
pub const MAX_COMPLETION_VALUES: usize = 100;

/// What is being completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum CompletionReference {
    /// An argument of a prompt.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// Prompt name.
        name: String,
        /// Display name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
    },
    /// A variable of a resource template.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The URI template.
        uri: String,
    },
}

/// The argument being completed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionArgument {
    /// Argument name.
    pub name: String,
    /// What the user typed so far.
    pub value: String,
}

/// Already-resolved arguments.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompletionContext {
    /// Other arguments' values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<BTreeMap<String, String>>,
}

/// `completion/complete` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteParams {
    /// Prompt or resource template.
    #[serde(rename = "ref")]
    pub reference: CompletionReference,
    /// The argument.
    pub argument: CompletionArgument,
    /// Context.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompletionContext>,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// The completion values.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// Up to [`MAX_COMPLETION_VALUES`] values.
    pub values: Vec<String>,
    /// Total number of matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// More matches exist than were returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
}

/// `completion/complete` result.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CompleteResult {
    /// The values.
    pub completion: Completion,
    /// `"complete"` (modern).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

crate::impl_mcp_result!(CompleteResult);
