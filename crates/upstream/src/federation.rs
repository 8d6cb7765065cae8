//! The federation: every configured upstream, their lists read at start-up, and their
//! entries registered in the catalog under exposed names `<upstream><separator><name>`
//! (resource URIs unchanged), include/exclude applied, in config order then upstream order.
//!
//! Invariant: a name that breaks the MCP name rules or collides with one already registered
//! is never registered; it is reported (logged and kept in the status) naming both sources.
//! An upstream that cannot be reached does not stop start-up.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use mcpgate_runtime::catalog::{CatalogBuilder, Tool as _};

use crate::config::{TransportKind, UpstreamConfig, validate_all, validate_renames};
use crate::connect_tool::ConnectTool;
use crate::entries::{UpstreamPrompt, UpstreamResource};
use crate::error::UpstreamError;
use crate::exposed_tool::upstream_tool;
use crate::oauth::Connections;
use crate::personal_tools::PersonalTools;
use crate::upstream::{ConnectionsCell, Lists, Upstream};

/// What one upstream contributed, for `/upstreams`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Contribution {
    /// Tools registered.
    pub tools: usize,
    /// Prompts registered.
    pub prompts: usize,
    /// Resources and templates registered.
    pub resources: usize,
    /// Why its lists could not be read, if they could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub list_error: Option<String>,
    /// Entries left out (invalid or colliding names), each saying why.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
    /// Whether these counts come from a registration (not only a list read's error).
    #[serde(skip)]
    pub registered: bool,
}

/// Every upstream of this replica.
#[derive(Debug)]
pub struct Federation {
    upstreams: Vec<Arc<Upstream>>,
    separator: String,
    contributions: Mutex<HashMap<String, Contribution>>,
    /// Where `auth = "oauth"` upstreams get each caller's token (set once, at start-up;
    /// shared with every upstream).
    connections: ConnectionsCell,
    /// The `auth = "oauth"` upstreams' tools of each caller (shared by every snapshot, so
    /// their per-principal cache outlives a rebuild).
    personal: Arc<PersonalTools>,
}

impl Federation {
    /// Builds the upstreams of validated configurations (nothing is started yet).
    pub fn new(configs: Vec<UpstreamConfig>, separator: &str) -> Result<Self, UpstreamError> {
        validate_all(&configs)?;
        validate_renames(&configs, separator)?;
        let connections = ConnectionsCell::default();
        let upstreams = configs
            .into_iter()
            .map(|c| Upstream::with_connections(c, connections.clone()).map(Arc::new))
            .collect::<Result<_, _>>()?;
        let upstreams: Vec<Arc<Upstream>> = upstreams;
        let personal = Arc::new(PersonalTools::new(
            upstreams.iter().filter(|u| u.config().is_oauth()).cloned().collect(),
            separator,
            connections.clone(),
        ));
        Ok(Self { upstreams, separator: separator.to_owned(), contributions: Mutex::default(), connections, personal })
    }

    /// The upstreams, in config order.
    pub fn upstreams(&self) -> &[Arc<Upstream>] {
        &self.upstreams
    }

    /// Installs where `auth = "oauth"` upstreams get each caller's token; the first call wins.
    pub fn set_connections(&self, connections: Arc<dyn Connections>) {
        let _ = self.connections.set(connections);
    }

    /// Where `auth = "oauth"` upstreams get each caller's token, once installed.
    pub fn connections(&self) -> Option<&Arc<dyn Connections>> {
        self.connections.get()
    }

    /// Whether any upstream is configured.
    pub fn is_empty(&self) -> bool {
        self.upstreams.is_empty()
    }

    /// What each upstream contributed to the catalog.
    pub fn contribution(&self, name: &str) -> Contribution {
        self.contributions.lock().ok().and_then(|c| c.get(name).cloned()).unwrap_or_default()
    }

    /// Reads every upstream's lists at once, each within `wait`; an upstream that fails
    /// contributes nothing (and says why in its status).
    pub async fn discover(&self, wait: Duration) -> Vec<Option<Lists>> {
        let cancel = CancellationToken::new();
        let reads = self.upstreams.iter().map(|u| {
            let cancel = &cancel;
            async move {
                let outcome = tokio::time::timeout(wait, u.lists(cancel))
                    .await
                    .unwrap_or(Err(UpstreamError::Timeout { secs: wait.as_secs() }));
                match outcome {
                    Ok(lists) => {
                        if let Ok(mut c) = self.contributions.lock() {
                            c.entry(u.name().to_owned()).or_default().list_error = None;
                        }
                        Some(lists)
                    }
                    Err(e) => {
                        tracing::warn!(upstream = %u.name(), error = &e as &dyn std::error::Error, "cannot read the upstream's lists; its tools are not served until it answers");
                        if let Ok(mut c) = self.contributions.lock() {
                            c.entry(u.name().to_owned()).or_default().list_error = Some(e.client_text());
                        }
                        None
                    }
                }
            }
        });
        futures_util::future::join_all(reads).await
    }

    /// Records that `upstream`'s lists could not be read now (its last known lists are
    /// served meanwhile, if any).
    pub fn note_list_error(&self, upstream: &str, error: String) {
        if let Ok(mut c) = self.contributions.lock() {
            c.entry(upstream.to_owned()).or_default().list_error = Some(error);
        }
    }

    /// Resolves when any upstream announces that its lists changed.
    pub async fn any_list_changed(&self) {
        if self.upstreams.is_empty() {
            return std::future::pending().await;
        }
        let waits = self.upstreams.iter().map(|u| Box::pin(u.list_changed()));
        futures_util::future::select_all(waits).await;
    }

    /// Registers every upstream's entries (`lists` as `discover` returned them).
    pub fn register(&self, builder: &mut CatalogBuilder, lists: &[Option<Lists>]) {
        if !self.upstreams.is_empty() {
            builder.advertise_all();
        }
        if self.upstreams.iter().any(|u| u.config().is_oauth()) {
            builder.resolver(self.personal.clone());
        }
        let mut owners: HashMap<String, String> = HashMap::new();
        for (upstream, lists) in self.upstreams.iter().zip(lists) {
            let Some(lists) = lists else { continue };
            let contribution = self.register_one(builder, upstream, lists, &mut owners);
            let Ok(mut c) = self.contributions.lock() else { continue };
            let old = c.get(upstream.name());
            // Each catalog build registers every upstream again (twice at start-up, once per
            // refresh): only a contribution that changed is news.
            let changed = old.is_none_or(|old| {
                !old.registered
                    || (old.tools, old.prompts, old.resources, &old.problems)
                        != (contribution.tools, contribution.prompts, contribution.resources, &contribution.problems)
            });
            if changed {
                for problem in &contribution.problems {
                    tracing::warn!(upstream = %upstream.name(), "{problem}");
                }
                tracing::info!(
                    upstream = %upstream.name(),
                    tools = contribution.tools,
                    prompts = contribution.prompts,
                    resources = contribution.resources,
                    "upstream entries registered"
                );
            }
            let list_error = old.and_then(|old| old.list_error.clone());
            c.insert(upstream.name().to_owned(), Contribution { list_error, registered: true, ..contribution });
        }
    }

    fn register_one(
        &self,
        builder: &mut CatalogBuilder,
        upstream: &Arc<Upstream>,
        lists: &Lists,
        owners: &mut HashMap<String, String>,
    ) -> Contribution {
        let config = upstream.config();
        let mut out = Contribution::default();
        let taken = |owners: &HashMap<String, String>, kind: &str, name: &str| {
            owners.get(&format!("{kind}:{name}")).cloned().unwrap_or_else(|| "a built-in".to_owned())
        };
        if config.is_oauth() {
            // Its tools are each caller's own (read with their token, see `PersonalTools`);
            // everyone's lists hold its stand-in, which those connected see replaced.
            let stand_in = ConnectTool::new(upstream.clone(), &self.separator, self.connections.clone());
            let exposed = stand_in.descriptor().info.name.clone();
            if builder.has_tool(&exposed) {
                out.problems.push(format!(
                    "upstream {} connect tool left out: {exposed:?} is already {}",
                    config.name,
                    taken(owners, "tool", &exposed)
                ));
            } else {
                builder.tool(stand_in);
                owners.insert(format!("tool:{exposed}"), format!("upstream {} connect tool", config.name));
                out.tools += 1;
            }
            return out;
        }
        for info in &lists.tools {
            let source = format!("upstream {} tool {:?}", config.name, info.name);
            let tool = match upstream_tool(upstream, &self.separator, info) {
                Ok(Some(tool)) => tool,
                Ok(None) => continue,
                Err(problem) => {
                    out.problems.push(format!("{source} left out: {problem}"));
                    continue;
                }
            };
            let exposed = tool.descriptor().info.name.clone();
            if builder.has_tool(&exposed) {
                out.problems
                    .push(format!("{source} left out: {exposed:?} is already {}", taken(owners, "tool", &exposed)));
                continue;
            }
            builder.tool(tool);
            owners.insert(format!("tool:{exposed}"), source);
            out.tools += 1;
        }
        for prompt in &lists.prompts {
            let exposed = format!("{}{}{}", config.name, self.separator, prompt.name);
            let source = format!("upstream {} prompt {:?}", config.name, prompt.name);
            if builder.has_prompt(&exposed) {
                out.problems
                    .push(format!("{source} left out: {exposed:?} is already {}", taken(owners, "prompt", &exposed)));
                continue;
            }
            let mut descriptor = prompt.clone();
            descriptor.name = exposed.clone();
            builder.prompt(UpstreamPrompt::new(upstream.clone(), prompt.name.clone(), descriptor));
            owners.insert(format!("prompt:{exposed}"), source);
            out.prompts += 1;
        }
        let resources = lists.resources.iter().map(|r| (r.uri.clone(), Some(r), None));
        let templates = lists.templates.iter().map(|t| (t.uri_template.clone(), None, Some(t)));
        for (uri, resource, template) in resources.chain(templates) {
            let source = format!("upstream {} resource {uri:?}", config.name);
            if builder.has_resource(&uri) {
                out.problems.push(format!(
                    "{source} left out: the URI is already served by {}",
                    taken(owners, "resource", &uri)
                ));
                continue;
            }
            match (resource, template) {
                (Some(r), _) => builder.resource(UpstreamResource::fixed(upstream.clone(), r.clone())),
                (_, Some(t)) => builder.resource(UpstreamResource::template(upstream.clone(), t.clone())),
                _ => continue,
            };
            owners.insert(format!("resource:{uri}"), source);
            out.resources += 1;
        }
        out
    }

    /// Stops every upstream's process.
    pub fn shutdown(&self) {
        for u in &self.upstreams {
            u.shutdown();
        }
    }

    /// A status line per upstream, for `/upstreams`.
    pub fn status(&self) -> Vec<UpstreamStatus> {
        self.upstreams
            .iter()
            .map(|u| {
                let stats = u.stats();
                UpstreamStatus {
                    name: u.name().to_owned(),
                    transport: u.config().transport,
                    breaker: u.breaker_state().as_str(),
                    calls: stats.calls.load(std::sync::atomic::Ordering::Relaxed),
                    in_flight: stats.in_flight.load(std::sync::atomic::Ordering::Relaxed),
                    errors: stats.errors().filter(|(_, n)| *n > 0).map(|(k, n)| (k.to_owned(), n)).collect(),
                    restarts: u.restarts(),
                    catalog: self.contribution(u.name()),
                }
            })
            .collect()
    }
}

/// One upstream's state.
#[derive(Debug, Clone, Serialize)]
pub struct UpstreamStatus {
    /// Name.
    pub name: String,
    /// Transport.
    pub transport: TransportKind,
    /// Breaker: closed, open, half_open.
    pub breaker: &'static str,
    /// Requests sent by this replica.
    pub calls: u64,
    /// In flight now.
    pub in_flight: u64,
    /// Errors by kind.
    pub errors: HashMap<String, u64>,
    /// stdio process restarts.
    pub restarts: u64,
    /// What it contributed to the catalog.
    pub catalog: Contribution,
}
