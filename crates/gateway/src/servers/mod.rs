//! Endpoints: the root `/mcp` and the virtual servers of `[[server]]`, each an MCP endpoint
//! on its own path with its own selection of the catalog, rules, `server/discover` and
//! protected resource metadata (see docs/servers.md).
//!
//! Invariant: the set is fixed at start-up; a request is bound to its endpoint by its route
//! (no lookup, no allocation beyond an `Arc` clone) and everything it reaches (lists, uses,
//! policy, tasks, the audit trail) is judged through that endpoint.

mod capabilities;
mod endpoint;
mod selection;

use std::sync::Arc;

pub(crate) use capabilities::legacy_capabilities;
pub use endpoint::Endpoint;
pub(crate) use endpoint::{Rendering, task_seen_through};
pub use selection::Selection;

use mcpgate_protocol::implementation::Implementation;

use crate::config::{AuthMode, Config};
use crate::error::StartupError;
use crate::policy::Policy;

/// The root endpoint and the virtual servers.
#[derive(Debug, Clone)]
pub struct Endpoints {
    root: Arc<Endpoint>,
    servers: Vec<Arc<Endpoint>>,
}

impl Endpoints {
    /// Builds every endpoint of `config`; a server's bad rule stops start-up, named.
    pub(crate) fn build(
        config: &Config,
        server_info: Arc<Implementation>,
        rendering: &Rendering<'_>,
    ) -> Result<Self, StartupError> {
        crate::config::validate_servers(config)?;
        let policy = Arc::new(Policy::from_rules(&config.policy, config.policy_default, config.policy_hide_denied)?);
        let root_resource = (config.auth.mode != AuthMode::None).then(|| config.auth.resource.clone()).flatten();
        let root = Endpoint::root(
            crate::config::MCP_PATH,
            Arc::clone(&policy),
            server_info,
            config.server.instructions.clone(),
            root_resource,
            rendering,
        )?;
        let servers = config
            .servers
            .iter()
            .map(|s| Endpoint::virtual_server(s, Arc::clone(&policy), rendering).map(Arc::new))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { root: Arc::new(root), servers })
    }

    /// The root endpoint.
    pub fn root(&self) -> &Arc<Endpoint> {
        &self.root
    }

    /// The virtual servers, in configuration order.
    pub fn servers(&self) -> &[Arc<Endpoint>] {
        &self.servers
    }

    /// The virtual server served at `path`.
    pub fn at_path(&self, path: &str) -> Option<&Arc<Endpoint>> {
        self.servers.iter().find(|s| s.path() == path)
    }
}

/// The public origin (`scheme://authority`) of the gateway's protected resources: from
/// `auth.resource`, else `auth.jwt.audience`, else `server.public_url`.
pub(crate) fn public_origin(config: &Config) -> Option<String> {
    if config.auth.mode == AuthMode::None {
        return None;
    }
    let base = config
        .auth
        .resource
        .as_deref()
        .or(config.auth.jwt.audience.as_deref())
        .or(config.server.public_url.as_deref())?;
    let (scheme, rest) = base.split_once("://")?;
    let authority = rest.split('/').next().filter(|a| !a.is_empty())?;
    Some(format!("{scheme}://{authority}"))
}
