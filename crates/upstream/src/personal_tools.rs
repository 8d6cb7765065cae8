//! The tools each caller has of the `auth = "oauth"` upstreams: read with the caller's own
//! token once they hold a connection, cached per principal on this replica (bounded, for the
//! upstream's `ttlMs`, capped; whatever its `cacheScope`, since the list was read with this
//! caller's credentials), renamed, overridden and filtered like any upstream's tools. As the runtime's
//! [`ToolResolver`] it puts them in that caller's `tools/list` in place of the upstream's
//! `<upstream>_connect` stand-in, and finds them for a call or a task run (which rebuilds the
//! creator's principal, whose key is the same, on any replica).
//!
//! Each list and each call looks the caller's connection up once per `oauth` upstream (one
//! vault read, [`Connections::lookup`]): that decides between their tools and the stand-in,
//! and its token goes with the list's pages and with the call found (the tool resolved for a
//! call holds it), so neither asks for it again.
//!
//! Invariants: a list read for one principal is stored under their key only and never shown
//! or run for another; a caller without a connection gets the stand-in (asking to connect),
//! never the upstream's tools; a call is only ever sent for a tool found in the caller's list
//! (renamed, filtered), never for a name merely shaped like one (while the list cannot be
//! read, the call is answered with that error).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{
    BoxFuture, Outcome, PersonalTools as Personal, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor,
    ToolResolver,
};

use crate::connect_tool::ConnectTool;
use crate::entries::UpstreamTool;
use crate::error::UpstreamError;
use crate::exposed_tool::{policy, upstream_tool};
use crate::oauth::{Connections, HeldToken};
use crate::upstream::{ConnectionsCell, Upstream};

/// Most (principal, upstream) lists kept on a replica.
const MAX_CACHED: usize = 4096;
/// How long a list is kept when the upstream did not say (`ttlMs`).
const DEFAULT_TTL: Duration = Duration::from_secs(60);
/// Longest a list is kept, whatever the upstream said (a changed list shows within it).
const MAX_TTL: Duration = Duration::from_secs(300);

/// Cache key: (principal key, upstream name).
type Key = (String, String);

struct Cached {
    tools: Vec<Arc<UpstreamTool>>,
    ttl_ms: Option<u64>,
    expires: Instant,
}

/// The `auth = "oauth"` upstreams' tools, per principal.
pub(crate) struct PersonalTools {
    upstreams: Vec<Arc<Upstream>>,
    separator: String,
    connections: ConnectionsCell,
    cache: Mutex<HashMap<Key, Cached>>,
}

impl std::fmt::Debug for PersonalTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersonalTools").field("upstreams", &self.upstreams.len()).finish_non_exhaustive()
    }
}

impl PersonalTools {
    /// For `upstreams` (the `auth = "oauth"` ones), exposed as `<upstream><separator><tool>`.
    pub(crate) fn new(upstreams: Vec<Arc<Upstream>>, separator: &str, connections: ConnectionsCell) -> Self {
        Self { upstreams, separator: separator.to_owned(), connections, cache: Mutex::default() }
    }

    /// The upstream an exposed name belongs to, and the upstream's own name for the tool; a
    /// renamed tool answers to its override's `rename` only.
    fn upstream_of<'a>(&'a self, name: &'a str) -> Option<(&'a Arc<Upstream>, &'a str)> {
        let renamed = self.upstreams.iter().find_map(|u| {
            let (remote, _) = u.config().overrides.iter().find(|(_, o)| o.rename.as_deref() == Some(name))?;
            Some((u, remote.as_str()))
        });
        renamed.or_else(|| {
            self.upstreams.iter().find_map(|u| {
                let remote = name.strip_prefix(u.name())?.strip_prefix(self.separator.as_str())?;
                let renamed = u.config().overrides.get(remote).is_some_and(|o| o.rename.is_some());
                (!remote.is_empty() && !renamed).then_some((u, remote))
            })
        })
    }

    fn stand_in(&self, upstream: &Arc<Upstream>) -> ConnectTool {
        ConnectTool::new(upstream.clone(), &self.separator, self.connections.clone())
    }

    /// `principal`'s tools of `upstream` (kept, or read now with `held`, their token), and
    /// the upstream's `ttlMs` for them.
    async fn tools(
        &self,
        upstream: &Arc<Upstream>,
        principal: &Principal,
        held: &HeldToken,
    ) -> Result<(Vec<Arc<UpstreamTool>>, Option<u64>), UpstreamError> {
        let key: Key = (principal.key().to_owned(), upstream.name().to_owned());
        let now = Instant::now();
        if let Some(cached) = self.cache.lock().unwrap_or_else(PoisonError::into_inner).get(&key)
            && cached.expires > now
        {
            return Ok((cached.tools.clone(), cached.ttl_ms));
        }
        let (infos, ttl_ms) = upstream.tools_for(principal, Some(held), &CancellationToken::new()).await?;
        let tools: Vec<Arc<UpstreamTool>> = infos
            .iter()
            .filter_map(|info| match upstream_tool(upstream, &self.separator, info) {
                Ok(Some(tool)) => Some(Arc::new(tool)),
                Ok(None) => None,
                Err(problem) => {
                    tracing::warn!(upstream = %upstream.name(), tool = %info.name, "left out: {problem}");
                    None
                }
            })
            .collect();
        let lifetime = ttl_ms.map_or(DEFAULT_TTL, |ms| Duration::from_millis(ms).min(MAX_TTL));
        if !lifetime.is_zero() {
            let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
            if cache.len() >= MAX_CACHED {
                cache.retain(|_, c| c.expires > now);
            }
            if cache.len() >= MAX_CACHED
                && let Some(first) = cache.iter().min_by_key(|(_, c)| c.expires).map(|(k, _)| k.clone())
            {
                cache.remove(&first);
            }
            cache.insert(key, Cached { tools: tools.clone(), ttl_ms, expires: now + lifetime });
        }
        Ok((tools, ttl_ms))
    }

    /// `principal`'s connection to `upstream`, if they hold one (a store that cannot say:
    /// none): one vault read.
    async fn lookup(&self, upstream: &Upstream, principal: &Principal) -> Option<HeldToken> {
        let connections: &Arc<dyn Connections> = self.connections.get()?;
        match connections.lookup(upstream.name(), principal).await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!(upstream = %upstream.name(), error = &e as &dyn std::error::Error, "cannot tell whether the caller is connected");
                None
            }
        }
    }
}

impl ToolResolver for PersonalTools {
    fn resolve<'a>(&'a self, name: &'a str, principal: &'a Principal) -> BoxFuture<'a, Option<Arc<dyn Tool>>> {
        Box::pin(async move {
            let (upstream, remote) = self.upstream_of(name)?;
            let stand_in = || {
                let tool = self.stand_in(upstream).standing_in_for(name, policy(upstream.config(), remote));
                Arc::new(tool) as Arc<dyn Tool>
            };
            let Some(held) = self.lookup(upstream, principal).await else {
                return Some(stand_in());
            };
            match self.tools(upstream, principal, &held).await {
                Ok((tools, _)) => {
                    let tool = tools.into_iter().find(|t| t.descriptor().info.name == name)?;
                    Some(Arc::new(Holding { tool, held }))
                }
                Err(UpstreamError::ConnectionRequired { .. }) => Some(stand_in()),
                // Its list cannot be read now (down, slow): nothing says the tool exists, nor
                // whether the upstream's filter lets it through, nor how to call it. The call
                // is answered with that error, never sent.
                Err(e) => {
                    tracing::debug!(upstream = %upstream.name(), error = &e as &dyn std::error::Error, "the caller's list could not be read");
                    let detail = format!(
                        "Upstream {}: your tools there cannot be listed now ({}); call again shortly.",
                        upstream.name(),
                        e.client_text()
                    );
                    Some(Arc::new(Unlisted::new(name, upstream, policy(upstream.config(), remote), detail)))
                }
            }
        })
    }

    fn personal<'a>(&'a self, principal: &'a Principal) -> BoxFuture<'a, Personal> {
        Box::pin(async move {
            let mut personal = Personal::default();
            for upstream in &self.upstreams {
                let Some(held) = self.lookup(upstream, principal).await else {
                    continue;
                };
                match self.tools(upstream, principal, &held).await {
                    Ok((tools, ttl_ms)) => {
                        let stand_in = format!("{}{}connect", upstream.name(), self.separator);
                        personal.replaced.push((stand_in, tools.into_iter().map(|t| t as Arc<dyn Tool>).collect()));
                        if let Some(ttl) = ttl_ms {
                            personal.ttl_ms = Some(personal.ttl_ms.map_or(ttl, |t| t.min(ttl)));
                        }
                    }
                    // The stand-in stays: calling it says what is wrong (or asks to connect). The
                    // link is the user's to open, not the log's: logged without it.
                    Err(UpstreamError::ConnectionRequired { .. }) => {
                        tracing::debug!(upstream = %upstream.name(), "the caller's list needs a connection again")
                    }
                    Err(e) => {
                        tracing::debug!(upstream = %upstream.name(), error = &e as &dyn std::error::Error, "the caller's list could not be read")
                    }
                }
            }
            personal
        })
    }
}

/// A caller's tool of an upstream as resolved for one call: its requests go with the token
/// the look-up that found it found (for that caller only: it is made per resolution, never
/// kept).
struct Holding {
    tool: Arc<UpstreamTool>,
    held: HeldToken,
}

impl Tool for Holding {
    fn descriptor(&self) -> &ToolDescriptor {
        self.tool.descriptor()
    }

    fn check(&self, arguments: &serde_json::Value) -> Result<(), mcpgate_runtime::catalog::Failure> {
        self.tool.check(arguments)
    }

    fn preflight(
        &self,
        call: &ToolCall,
        capabilities: &mcpgate_protocol::capabilities::ClientCapabilities,
    ) -> Outcome<()> {
        self.tool.preflight(call, capabilities)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        self.tool.call_holding(call, cx, Some(&self.held))
    }
}

/// What a caller's tool of an upstream resolves to while their list there cannot be read: an
/// error naming why, under the name called (with the task policy the upstream's tools have).
struct Unlisted {
    descriptor: ToolDescriptor,
    detail: String,
}

impl Unlisted {
    fn new(name: &str, upstream: &Upstream, policy: TaskPolicy, detail: String) -> Self {
        let mut descriptor = ToolDescriptor::new(name, "", serde_json::json!({ "type": "object" })).task_policy(policy);
        descriptor.upstream = Some(Arc::from(upstream.name()));
        Self { descriptor, detail }
    }
}

impl Tool for Unlisted {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, _call: ToolCall, _cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move { Outcome::Complete(CallToolResult::error(self.detail.clone())) })
    }
}
