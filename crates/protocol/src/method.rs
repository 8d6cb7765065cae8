//! Method names of both eras and which era offers each.
//!
//! Invariant: dispatch looks methods up here once; a method that is not listed, or not
//! offered in the request's era, is "method not found".

use crate::version::Era;

/// A client→server request method this crate knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// `initialize` (legacy handshake).
    Initialize,
    /// `ping` (legacy only; removed in 2026-07-28).
    Ping,
    /// `server/discover` (modern only).
    ServerDiscover,
    /// `tools/list`.
    ToolsList,
    /// `tools/call`.
    ToolsCall,
    /// `prompts/list`.
    PromptsList,
    /// `prompts/get`.
    PromptsGet,
    /// `resources/list`.
    ResourcesList,
    /// `resources/read`.
    ResourcesRead,
    /// `resources/templates/list`.
    ResourcesTemplatesList,
    /// `completion/complete`.
    CompletionComplete,
    /// `tasks/get` (both eras).
    TasksGet,
    /// `tasks/result` (legacy only).
    TasksResult,
    /// `tasks/list` (legacy only).
    TasksList,
    /// `tasks/cancel` (both eras).
    TasksCancel,
    /// `tasks/update` (modern tasks extension only).
    TasksUpdate,
    /// `subscriptions/listen` (modern only; legacy sessions use their GET stream).
    SubscriptionsListen,
}

impl Method {
    /// Every known method.
    pub const ALL: [Self; 17] = [
        Self::Initialize,
        Self::Ping,
        Self::ServerDiscover,
        Self::ToolsList,
        Self::ToolsCall,
        Self::PromptsList,
        Self::PromptsGet,
        Self::ResourcesList,
        Self::ResourcesRead,
        Self::ResourcesTemplatesList,
        Self::CompletionComplete,
        Self::TasksGet,
        Self::TasksResult,
        Self::TasksList,
        Self::TasksCancel,
        Self::TasksUpdate,
        Self::SubscriptionsListen,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Initialize => "initialize",
            Self::Ping => "ping",
            Self::ServerDiscover => "server/discover",
            Self::ToolsList => "tools/list",
            Self::ToolsCall => "tools/call",
            Self::PromptsList => "prompts/list",
            Self::PromptsGet => "prompts/get",
            Self::ResourcesList => "resources/list",
            Self::ResourcesRead => "resources/read",
            Self::ResourcesTemplatesList => "resources/templates/list",
            Self::CompletionComplete => "completion/complete",
            Self::TasksGet => "tasks/get",
            Self::TasksResult => "tasks/result",
            Self::TasksList => "tasks/list",
            Self::TasksCancel => "tasks/cancel",
            Self::TasksUpdate => "tasks/update",
            Self::SubscriptionsListen => "subscriptions/listen",
        }
    }

    /// Looks a wire name up.
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == name)
    }

    /// Whether it is one of the `tasks/*` methods.
    pub fn is_task_method(self) -> bool {
        matches!(self, Self::TasksGet | Self::TasksResult | Self::TasksList | Self::TasksCancel | Self::TasksUpdate)
    }

    /// Whether the method exists in `era` at all.
    pub fn exists_in(self, era: Era) -> bool {
        match self {
            Self::Initialize | Self::Ping | Self::TasksResult | Self::TasksList => era == Era::Legacy,
            Self::ServerDiscover | Self::TasksUpdate | Self::SubscriptionsListen => era == Era::Modern,
            _ => true,
        }
    }
}

/// Notification method names this crate refers to.
pub mod notification {
    /// Client → server after `initialize` (legacy).
    pub const INITIALIZED: &str = "notifications/initialized";
    /// Progress for a request that carried a `progressToken`.
    pub const PROGRESS: &str = "notifications/progress";
    /// Cancellation of an in-flight request (legacy; stdio-only in 2026-07-28).
    pub const CANCELLED: &str = "notifications/cancelled";
    /// A log message for a request that opted in.
    pub const MESSAGE: &str = "notifications/message";
    /// Legacy task status change.
    pub const TASK_STATUS: &str = "notifications/tasks/status";
}
