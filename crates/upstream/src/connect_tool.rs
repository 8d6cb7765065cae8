//! `<upstream>_connect`: the one tool an `auth = "oauth"` upstream shows a caller who has not
//! connected their account there (a connected caller sees the upstream's own tools instead).
//! Calling it gives the caller their connect link (in their client's era, see
//! `connect_ask`), or says they are connected already. It also stands in for any of the
//! upstream's tools a caller without a connection calls by name.
//!
//! Invariant: it calls the upstream only for a caller who holds a connection, with that caller's
//! own token (to learn why their tools could not be listed); the link comes from the
//! connections, bound to the caller.

use std::sync::Arc;

use serde_json::json;

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::{BoxFuture, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor};

use crate::connect_ask;
use crate::continuation::Continuation;
use crate::error::UpstreamError;
use crate::oauth::HeldToken;
use crate::upstream::{ConnectionsCell, Upstream};

/// The stand-in of an `auth = "oauth"` upstream.
pub(crate) struct ConnectTool {
    upstream: Arc<Upstream>,
    descriptor: ToolDescriptor,
    connections: ConnectionsCell,
}

impl ConnectTool {
    /// `<upstream><separator>connect`.
    pub(crate) fn new(upstream: Arc<Upstream>, separator: &str, connections: ConnectionsCell) -> Self {
        let name = upstream.name();
        let at = upstream
            .config()
            .url
            .as_deref()
            .and_then(|u| reqwest::Url::parse(u).ok())
            .and_then(|u| u.host_str().map(|h| format!(" ({h})")))
            .unwrap_or_default();
        let description = format!(
            "Connect your own account at {name}{at}: its tools then appear in your tools list, acting as you. \
             Call this, open the link it gives in a browser, sign in and approve; then list tools again."
        );
        let mut descriptor = ToolDescriptor::new(
            &format!("{name}{separator}connect"),
            &description,
            json!({ "type": "object", "properties": {} }),
        )
        .title(&format!("Connect {name}"));
        descriptor.upstream = Some(Arc::from(name));
        Self { upstream, descriptor, connections }
    }

    /// Standing in for the upstream's tool exposed as `name` (called by a caller without a
    /// connection): under that name and with its task policy, so a call that would have been
    /// a task is one here too, and its run, once connected, is the tool's own.
    pub(crate) fn standing_in_for(mut self, name: &str, policy: TaskPolicy) -> Self {
        self.descriptor.info.name = name.to_owned();
        self.descriptor.task_policy = policy;
        self
    }
}

impl Tool for ConnectTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let name = self.upstream.name();
            if let Ok(Some(Continuation::Connect { key, .. })) = Continuation::of(&call, name)
                && let Some(declined) = connect_ask::declined(name, &key, &call)
            {
                return declined;
            }
            let Some(connections) = self.connections.get() else {
                return Outcome::Complete(CallToolResult::error(format!(
                    "Connecting an account at {name} is not set up on this gateway."
                )));
            };
            let listed = match connections.bearer(name, cx.principal()).await {
                // A connected caller is shown the stand-in only when their tools could not be
                // read: reading them again tells why, and a token the upstream now finds short
                // of scope (403 insufficient_scope) turns into a link asking for more.
                // (All pages with the token just given.)
                Ok(token) => {
                    let held = HeldToken::new(token, None);
                    self.upstream.tools_for(cx.principal(), Some(&held), &cx.cancellation_token()).await.map(|_| ())
                }
                Err(e) => Err(e),
            };
            match listed {
                Ok(()) => Outcome::Complete(CallToolResult::success(vec![ContentBlock::text(format!(
                    "Your account at {name} is connected: its tools are in your tools list (list tools again if you \
                     do not see them)."
                ))])),
                Err(UpstreamError::ConnectionRequired { upstream, url, elicitation_id }) => {
                    connect_ask::ask_to_connect(&upstream, &url, &elicitation_id, cx)
                }
                Err(e) => Outcome::Complete(CallToolResult::error(format!("Upstream {name}: {}", e.client_text()))),
            }
        })
    }
}
