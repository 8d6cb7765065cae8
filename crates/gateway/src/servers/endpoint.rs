//! An MCP endpoint: the root `/mcp` (the whole catalog under the root `[[policy]]`) or a
//! virtual server (its selection of the catalog under its own rules), with what it says
//! about itself (`server/discover`, `initialize`) and its protected resource metadata.
//!
//! Invariant: everything here is decided at start-up; a request only borrows it (an `Arc`
//! clone). Whatever a virtual server does not select does not exist there; the root selects
//! everything, so the root endpoint behaves exactly as `/mcp` did before virtual servers.

use std::sync::Arc;

use bytes::Bytes;

use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::Catalog;
use mcpgate_store::TaskRecord;

use super::capabilities::discover_result;
use super::selection::Selection;
use crate::config::{Discovery, VirtualServer};
use crate::error::{GatewayError, StartupError};
use crate::policy::{Caller, Decision, Policy, Use};

/// One endpoint.
#[derive(Debug)]
pub struct Endpoint {
    /// `""` for the root.
    name: Arc<str>,
    path: String,
    /// `None`: everything (the root).
    selection: Option<Selection>,
    policy: Arc<Policy>,
    /// A virtual server's: the root's rules, which hold on every endpoint.
    root_policy: Option<Arc<Policy>>,
    server_info: Arc<Implementation>,
    instructions: Option<String>,
    discovery: Discovery,
    discover: Bytes,
    /// The protected resource this endpoint is (RFC 9728 `resource`), when authentication is
    /// on and the gateway's public address is known.
    resource: Option<String>,
    /// The URL of its protected resource metadata.
    metadata_url: Option<String>,
}

/// What every endpoint's `server/discover` is rendered with.
pub(crate) struct Rendering<'a> {
    /// The catalog at start-up (for the capabilities).
    pub catalog: &'a Catalog,
    /// `ttlMs` of `server/discover`.
    pub ttl_ms: u64,
    /// Its cache scope.
    pub cache_scope: CacheScope,
    /// The public origin (`scheme://authority`) of the gateway's protected resources.
    pub origin: Option<&'a str>,
}

impl Endpoint {
    /// The root endpoint `/mcp`.
    pub(crate) fn root(
        path: &str,
        policy: Arc<Policy>,
        server_info: Arc<Implementation>,
        instructions: Option<String>,
        resource: Option<String>,
        r: &Rendering<'_>,
    ) -> Result<Self, StartupError> {
        let discover = render(r, r.catalog.has(), &server_info, instructions.clone())?;
        let metadata_url = resource.as_deref().map(crate::auth::resource_metadata_url);
        Ok(Self {
            name: Arc::from(""),
            path: path.to_owned(),
            selection: None,
            policy,
            root_policy: None,
            server_info,
            instructions,
            discovery: Discovery::List,
            discover,
            resource,
            metadata_url,
        })
    }

    /// A virtual server, judged by `root_policy` and then by its own rules, compiled here (a bad
    /// one stops start-up, named with its server).
    pub(crate) fn virtual_server(
        server: &VirtualServer,
        root_policy: Arc<Policy>,
        r: &Rendering<'_>,
    ) -> Result<Self, StartupError> {
        let policy = Policy::from_rules(&server.policy, server.policy_default, server.policy_hide_denied)
            .map_err(|e| e.within(&server.setting()))?;
        let selection = Selection::new(&server.tools, &server.prompts, &server.resources);
        let server_info = Arc::new(Implementation {
            title: Some(server.title.clone().unwrap_or_else(|| server.name.clone())),
            description: server.description.clone(),
            ..Implementation::new(&server.name, env!("CARGO_PKG_VERSION"))
        });
        let (tools, prompts, resources) = r.catalog.has();
        let (t, p, s) = selection.kinds();
        let has = (tools && t, prompts && p, resources && s);
        let discover = render(r, has, &server_info, server.instructions.clone())?;
        let path = server.endpoint_path();
        let resource = r.origin.map(|origin| format!("{origin}{path}"));
        let metadata_url = resource.as_deref().map(crate::auth::resource_metadata_url);
        Ok(Self {
            name: Arc::from(server.name.as_str()),
            path,
            selection: Some(selection),
            policy: Arc::new(policy),
            root_policy: Some(root_policy),
            server_info,
            instructions: server.instructions.clone(),
            discovery: server.discovery,
            discover,
            resource,
            metadata_url,
        })
    }

    /// Its name: `""` for the root (as policy's `server` and the audit trail's).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The virtual server's name, `None` at the root (as a task records it).
    pub fn server(&self) -> Option<&str> {
        (!self.name.is_empty()).then_some(&*self.name)
    }

    /// Its path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Its own rules (at the root: the root's).
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Whether every use is allowed here whatever it is (lists need no filtering by policy).
    pub fn policy_is_open(&self) -> bool {
        self.policy.is_open() && self.root_policy.as_ref().is_none_or(|root| root.is_open())
    }

    /// Whether its lists show `used` to `caller`: the root's rules and its own both allow it.
    pub fn shows(&self, caller: &Caller<'_>, used: Use<'_>) -> bool {
        self.root_policy.as_ref().is_none_or(|root| root.shows(caller, used)) && self.policy.shows(caller, used)
    }

    /// Checks a use here: the root's rules first (they hold on every endpoint, and see which
    /// server a use comes through), then its own; the first denial answers.
    pub fn check(&self, caller: &Caller<'_>, used: Use<'_>) -> Result<Decision, GatewayError> {
        if let Some(root) = &self.root_policy {
            root.check(caller, used)?;
        }
        self.policy.check(caller, used)
    }

    /// `principal` as its policy sees them here.
    pub fn caller<'a>(&'a self, principal: &'a Principal) -> Caller<'a> {
        Caller::at(principal, &self.name)
    }

    /// Whether it serves every tool, prompt and resource of the catalog (the root).
    pub fn selects_all(&self) -> bool {
        self.selection.is_none()
    }

    /// Whether it serves the tool exposed as `name`.
    pub fn selects_tool(&self, name: &str) -> bool {
        self.selection.as_ref().is_none_or(|s| s.tool(name))
    }

    /// Whether it serves the prompt `name`.
    pub fn selects_prompt(&self, name: &str) -> bool {
        self.selection.as_ref().is_none_or(|s| s.prompt(name))
    }

    /// Whether it serves the resource (or template) `uri`.
    pub fn selects_resource(&self, uri: &str) -> bool {
        self.selection.as_ref().is_none_or(|s| s.resource(uri))
    }

    /// Whether it serves any tools, prompts, resources now (for capabilities).
    pub fn has(&self, catalog: &Catalog) -> (bool, bool, bool) {
        let (tools, prompts, resources) = catalog.has();
        match &self.selection {
            None => (tools, prompts, resources),
            Some(s) => {
                let (t, p, r) = s.kinds();
                (tools && t, prompts && p, resources && r)
            }
        }
    }

    /// Whether a task (already found to be the caller's) is read through here: a virtual
    /// server reads only the tasks created through it, the root every one.
    pub fn sees_task(&self, record: &TaskRecord) -> bool {
        task_seen_through(self.server(), record)
    }

    /// `serverInfo`.
    pub fn server_info(&self) -> &Arc<Implementation> {
        &self.server_info
    }

    /// Instructions for the model.
    pub fn instructions(&self) -> Option<&str> {
        self.instructions.as_deref()
    }

    /// How it offers its tools.
    pub fn discovery(&self) -> Discovery {
        self.discovery
    }

    /// Whether it is a search server (`discovery = "search"`).
    pub fn searches(&self) -> bool {
        self.discovery == Discovery::Search
    }

    /// The pre-rendered `server/discover` result.
    pub fn discover(&self) -> Bytes {
        self.discover.clone()
    }

    /// Its protected resource URI, if known.
    pub fn resource(&self) -> Option<&str> {
        self.resource.as_deref()
    }

    /// An authentication failure as this endpoint answers it: its `WWW-Authenticate` names
    /// this endpoint's protected resource metadata, not the root's.
    pub fn challenge(&self, root: &Endpoint, error: GatewayError) -> GatewayError {
        match (error, &root.metadata_url, &self.metadata_url) {
            (GatewayError::Unauthorized { reason, challenge }, Some(theirs), Some(ours)) if self.server().is_some() => {
                let challenge = challenge
                    .replace(&format!("resource_metadata=\"{theirs}\""), &format!("resource_metadata=\"{ours}\""));
                GatewayError::Unauthorized { reason, challenge }
            }
            (error, ..) => error,
        }
    }
}

fn render(
    r: &Rendering<'_>,
    has: (bool, bool, bool),
    server_info: &Arc<Implementation>,
    instructions: Option<String>,
) -> Result<Bytes, StartupError> {
    discover_result(has, server_info, instructions, r.ttl_ms, r.cache_scope)
        .map_err(|e| StartupError::step_caused("rendering server/discover", "it cannot be serialized", e))
}

/// Whether `record` is read through the virtual server named `server` (`None`: the root, which
/// reads every task of its owner); also for callers that hold only the server's name (the
/// background companions, from a tool's context).
pub(crate) fn task_seen_through(server: Option<&str>, record: &TaskRecord) -> bool {
    server.is_none_or(|name| record.server.as_deref() == Some(name))
}
