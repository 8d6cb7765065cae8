//! `subscriptions/listen` (2026-07-28, SEP-2575): the filter a client opts in with, and the
//! messages of a listen stream (the acknowledgement first, then the notifications it asked
//! for, each tagged with the listen request's id).

use serde::{Deserialize, Serialize};

use crate::meta::RequestMeta;

/// `_meta` key naming the listen request a stream message belongs to.
pub const SUBSCRIPTION_ID_KEY: &str = "io.modelcontextprotocol/subscriptionId";

/// Notification method names of a listen stream.
pub mod notification {
    /// First message of every listen stream: what the server agreed to send.
    pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
    /// The tool list changed.
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    /// The prompt list changed.
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    /// The resource list changed.
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    /// A subscribed resource changed.
    pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
    /// A watched task changed (tasks extension): the full `DetailedTask`.
    pub const TASKS: &str = "notifications/tasks";
}

/// What a client opts in to on one listen stream (and, echoed in the acknowledgement, what
/// the server agreed to).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionFilter {
    /// `notifications/tools/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools_list_changed: Option<bool>,
    /// `notifications/prompts/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts_list_changed: Option<bool>,
    /// `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources_list_changed: Option<bool>,
    /// `notifications/resources/updated` for these URIs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_subscriptions: Option<Vec<String>>,
    /// `notifications/tasks` for these tasks (tasks extension).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ids: Option<Vec<String>>,
}

/// `subscriptions/listen` params.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListenParams {
    /// What the client opts in to.
    #[serde(default)]
    pub notifications: SubscriptionFilter,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_reads_and_writes_the_spec_spelling() {
        let json = r#"{"toolsListChanged":true,"resourceSubscriptions":["file:///a"],"taskIds":["t1"]}"#;
        let filter: SubscriptionFilter = serde_json::from_str(json).expect("parses");
        assert_eq!(filter.tools_list_changed, Some(true));
        assert_eq!(filter.task_ids.as_deref(), Some(&["t1".to_owned()][..]));
        assert_eq!(serde_json::to_string(&filter).expect("writes"), json);
    }
}
