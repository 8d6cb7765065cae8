//! The catalog: every tool, prompt and resource a replica serves, looked up by name, with the
//! list results pre-rendered per era so `*/list` costs one buffer copy; plus, when a
//! [`ToolResolver`] is installed, the tools each principal sees of their own (rendered per
//! request, `cacheScope: "private"`).
//!
//! Invariants: names are unique per kind; list order is registration order (deterministic on
//! every replica); a catalog never changes once built: new lists (an upstream's changed)
//! arrive as a new snapshot swapped in whole ([`SharedCatalog`]), never as a side effect of a
//! request, as 2026-07-28 requires.

pub mod ask;
mod context;
mod hand_off;
pub mod header_params;
mod input_check;
mod outcome;
mod prompt;
mod resolver;
mod resource;
pub mod search;
mod simple;
mod tool;
mod typed;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;

use mcpgate_protocol::Era;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::prompt::ListPromptsResult;
use mcpgate_protocol::resource::{ListResourceTemplatesResult, ListResourcesResult};
use mcpgate_protocol::result::{CacheScope, McpResult, ResultMeta, ResultType};
use mcpgate_protocol::tool::{ListToolsResult, ToolExecution};

pub use context::{Checkpoints, Frame, Notifier, ToolContext};
pub use hand_off::HandOff;
pub use header_params::{HeaderParam, ParamKind};
pub use input_check::missing_capabilities;
pub use outcome::{Failure, Outcome, decode_args};
pub use prompt::PromptHandler;
pub use resolver::{PersonalTools, ToolResolver};
pub use resource::{ResourceHandler, UriTemplate};
pub use simple::{FnPrompt, FnTool, StaticResource, TemplateResource};
pub use tool::{BoxFuture, TaskPolicy, Tool, ToolCall, ToolDescriptor};
pub use typed::{
    Background, Json, Plain, Progress, ToolError, ToolOutput, TypedTool, Work, background_tool, typed_tool,
};

use crate::error::RuntimeError;
use crate::principal::Principal;

struct RegisteredTool {
    tool: Arc<dyn Tool>,
    header_params: Vec<HeaderParam>,
}

/// The list results of one era, serialized.
#[derive(Debug, Clone)]
pub struct RenderedLists {
    /// `tools/list` result.
    pub tools: Bytes,
    /// `prompts/list` result.
    pub prompts: Bytes,
    /// `resources/list` result.
    pub resources: Bytes,
    /// `resources/templates/list` result.
    pub templates: Bytes,
}

/// How list results are rendered.
#[derive(Debug, Clone)]
pub struct ListRendering {
    /// `_meta` server info on modern results.
    pub server_info: Arc<Implementation>,
    /// `ttlMs` on modern results.
    pub ttl_ms: u64,
    /// `cacheScope` on modern results.
    pub cache_scope: CacheScope,
    /// Whether legacy tools show `execution.taskSupport` (only when tasks are served).
    pub legacy_task_support: bool,
}

/// Collects registrations, then validates and renders them. Cloning copies the
/// registrations (shared handlers), so one set of fixed entries can seed every snapshot.
#[derive(Default, Clone)]
pub struct CatalogBuilder {
    tools: Vec<Arc<dyn Tool>>,
    prompts: Vec<Arc<dyn PromptHandler>>,
    resources: Vec<Arc<dyn ResourceHandler>>,
    advertise_all: bool,
    resolver: Option<Arc<dyn ToolResolver>>,
}

impl CatalogBuilder {
    /// Installs the resolver of per-principal tools (the last installed wins).
    pub fn resolver(&mut self, resolver: Arc<dyn ToolResolver>) -> &mut Self {
        self.resolver = Some(resolver);
        self
    }

    /// Registers a tool.
    pub fn tool(&mut self, tool: impl Tool) -> &mut Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Registers a prompt.
    pub fn prompt(&mut self, prompt: impl PromptHandler) -> &mut Self {
        self.prompts.push(Arc::new(prompt));
        self
    }

    /// Registers a resource or resource template.
    pub fn resource(&mut self, resource: impl ResourceHandler) -> &mut Self {
        self.resources.push(Arc::new(resource));
        self
    }

    /// Advertises tools, prompts and resources even while none are registered (entries that
    /// arrive with a later snapshot, from upstream servers, must not need new capabilities).
    pub fn advertise_all(&mut self) -> &mut Self {
        self.advertise_all = true;
        self
    }

    /// Appends another builder's registrations after this one's.
    pub fn append(&mut self, other: CatalogBuilder) -> &mut Self {
        self.tools.extend(other.tools);
        self.prompts.extend(other.prompts);
        self.resources.extend(other.resources);
        self.advertise_all |= other.advertise_all;
        if other.resolver.is_some() {
            self.resolver = other.resolver;
        }
        self
    }

    /// Whether nothing at all is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty() && self.prompts.is_empty() && self.resources.is_empty()
    }

    /// Whether some tool is a background tool.
    pub fn has_background(&self) -> bool {
        self.tools.iter().any(|t| t.descriptor().background)
    }

    /// Takes out the tool of this name; whether there was one.
    pub fn remove_tool(&mut self, name: &str) -> bool {
        let before = self.tools.len();
        self.tools.retain(|t| t.descriptor().info.name != name);
        self.tools.len() != before
    }

    /// Names of the tools registered so far that may run as tasks, in registration order.
    pub fn task_tools(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .filter(|t| t.descriptor().task_policy != TaskPolicy::Forbidden)
            .map(|t| t.descriptor().info.name.as_str())
    }

    /// Whether a tool of this name is registered.
    pub fn has_tool(&self, name: &str) -> bool {
        self.tools.iter().any(|t| t.descriptor().info.name == name)
    }

    /// Whether a prompt of this name is registered.
    pub fn has_prompt(&self, name: &str) -> bool {
        self.prompts.iter().any(|p| p.descriptor().name == name)
    }

    /// Whether a resource of this URI (or a template of this URI template) is registered.
    pub fn has_resource(&self, uri: &str) -> bool {
        self.resources
            .iter()
            .any(|r| r.resource().is_some_and(|r| r.uri == uri) || r.template().is_some_and(|t| t.uri_template == uri))
    }

    /// Validates names and annotations and renders the lists.
    pub fn build(self, rendering: &ListRendering) -> Result<Catalog, RuntimeError> {
        let dup = |kind: &str, name: &str| RuntimeError::Registration {
            what: "building the catalog".to_owned(),
            problem: format!("{kind} {name:?} is registered twice (check the toolset list)"),
        };
        let mut tool_index = HashMap::new();
        let mut tools = Vec::with_capacity(self.tools.len());
        for tool in self.tools {
            let info = &tool.descriptor().info;
            if tool_index.insert(info.name.clone(), tools.len()).is_some() {
                return Err(dup("tool", &info.name));
            }
            let header_params = header_params::extract(&info.name, &info.input_schema)?;
            tools.push(RegisteredTool { tool, header_params });
        }
        let mut prompt_index = HashMap::new();
        for (i, prompt) in self.prompts.iter().enumerate() {
            if prompt_index.insert(prompt.descriptor().name.clone(), i).is_some() {
                return Err(dup("prompt", &prompt.descriptor().name));
            }
        }
        let mut uris = std::collections::HashSet::new();
        for r in &self.resources {
            let key = r.resource().map(|r| r.uri.clone()).or_else(|| r.template().map(|t| t.uri_template.clone()));
            if let Some(key) = key
                && !uris.insert(key.clone())
            {
                return Err(dup("resource", &key));
            }
        }
        // Lists differ between principals once some tools are theirs alone: no shared caching.
        let mut rendering = rendering.clone();
        if self.resolver.is_some() {
            rendering.cache_scope = CacheScope::Private;
        }
        let mut catalog = Catalog {
            tools,
            tool_index,
            prompts: self.prompts,
            prompt_index,
            resources: self.resources,
            advertise_all: self.advertise_all,
            modern: None,
            legacy: None,
            resolver: self.resolver,
            rendering,
        };
        catalog.modern = Some(catalog.render(Era::Modern, &catalog.rendering)?);
        catalog.legacy = Some(catalog.render(Era::Legacy, &catalog.rendering)?);
        Ok(catalog)
    }
}

/// The catalog a replica serves now: a snapshot that a list refresh replaces as a whole
/// (requests in flight keep the snapshot they started with).
#[derive(Clone)]
pub struct SharedCatalog(Arc<arc_swap::ArcSwap<Catalog>>);

impl SharedCatalog {
    /// Serves `catalog`.
    pub fn new(catalog: Catalog) -> Self {
        Self(Arc::new(arc_swap::ArcSwap::from_pointee(catalog)))
    }

    /// The current snapshot.
    pub fn load(&self) -> Arc<Catalog> {
        self.0.load_full()
    }

    /// Serves `catalog` from now on.
    pub fn replace(&self, catalog: Catalog) {
        self.0.store(Arc::new(catalog));
    }
}

impl std::fmt::Debug for SharedCatalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.load().fmt(f)
    }
}

/// Everything a replica serves.
pub struct Catalog {
    tools: Vec<RegisteredTool>,
    tool_index: HashMap<String, usize>,
    prompts: Vec<Arc<dyn PromptHandler>>,
    prompt_index: HashMap<String, usize>,
    resources: Vec<Arc<dyn ResourceHandler>>,
    advertise_all: bool,
    modern: Option<RenderedLists>,
    legacy: Option<RenderedLists>,
    /// Per-principal tools, if any source has them.
    resolver: Option<Arc<dyn ToolResolver>>,
    /// How its lists are rendered (per-principal tool lists too).
    rendering: ListRendering,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("tools", &self.tools.len())
            .field("prompts", &self.prompts.len())
            .field("resources", &self.resources.len())
            .finish()
    }
}

impl Catalog {
    /// A tool and its mirrored-header parameters.
    pub fn tool(&self, name: &str) -> Option<(&Arc<dyn Tool>, &[HeaderParam])> {
        let t = &self.tools[*self.tool_index.get(name)?];
        Some((&t.tool, &t.header_params))
    }

    /// Names of the tools that may run as tasks, in registration order.
    pub fn task_tools(&self) -> impl Iterator<Item = &str> {
        self.tools
            .iter()
            .filter(|t| t.tool.descriptor().task_policy != TaskPolicy::Forbidden)
            .map(|t| t.tool.descriptor().info.name.as_str())
    }

    /// The tool `principal` calls by `name`: the snapshot's own, else one of theirs alone (see
    /// [`ToolResolver`]); with its mirrored-header parameters.
    pub async fn find(&self, name: &str, principal: &Principal) -> Option<(Arc<dyn Tool>, Vec<HeaderParam>)> {
        if let Some((tool, params)) = self.tool(name) {
            return Some((Arc::clone(tool), params.to_vec()));
        }
        let tool = self.resolver.as_ref()?.resolve(name, principal).await?;
        let params = match header_params::extract(name, &tool.descriptor().info.input_schema) {
            Ok(params) => params,
            Err(e) => {
                tracing::warn!(
                    tool = name,
                    error = &e as &dyn std::error::Error,
                    "a per-principal tool has invalid header annotations"
                );
                return None;
            }
        };
        Some((tool, params))
    }

    /// `principal`'s `tools/list` result: the pre-rendered one, unless some stand-ins show
    /// their own tools for them instead (then rendered now, `cacheScope: "private"`).
    pub async fn tools_list(&self, era: Era, principal: &Principal) -> Result<Bytes, RuntimeError> {
        self.render_tools(era, principal, None).await
    }

    /// `principal`'s `tools/list` result with only the tools `keep` accepts (given each tool's
    /// name and upstream), rendered now with `cacheScope: "private"` (callers see different
    /// lists).
    pub async fn tools_list_where(
        &self,
        era: Era,
        principal: &Principal,
        keep: ListFilter<'_>,
    ) -> Result<Bytes, RuntimeError> {
        self.render_tools(era, principal, Some(keep)).await
    }

    async fn render_tools(
        &self,
        era: Era,
        principal: &Principal,
        keep: Option<ListFilter<'_>>,
    ) -> Result<Bytes, RuntimeError> {
        let personal = match &self.resolver {
            Some(resolver) => Some(resolver.personal(principal).await),
            None => None,
        };
        let replaced = personal.as_ref().map_or(&[][..], |p| &p.replaced[..]);
        // Only a list that shows someone's own tools takes their sources' lifetime.
        let personal_ttl = personal.as_ref().filter(|p| !p.replaced.is_empty()).and_then(|p| p.ttl_ms);
        if replaced.is_empty() && keep.is_none() {
            return Ok(self.lists(era).tools.clone());
        }
        let kept = |d: &ToolDescriptor| keep.is_none_or(|keep| keep(&d.info.name, d.upstream.as_deref()));
        let mut tools = Vec::with_capacity(self.tools.len());
        for t in &self.tools {
            let name = &t.tool.descriptor().info.name;
            match replaced.iter().find(|(stand_in, _)| stand_in == name) {
                Some((_, own)) => tools.extend(
                    own.iter().map(|o| o.descriptor()).filter(|d| kept(d)).map(|d| tool_info(d, era, &self.rendering)),
                ),
                None if kept(t.tool.descriptor()) => tools.push(tool_info(t.tool.descriptor(), era, &self.rendering)),
                None => {}
            }
        }
        let mut rendering = self.rendering.clone();
        if let Some(ttl) = personal_ttl {
            rendering.ttl_ms = ttl.min(rendering.ttl_ms);
        }
        if keep.is_some() {
            rendering.cache_scope = CacheScope::Private;
        }
        finish(ListToolsResult::new(tools), era, &rendering)
    }

    /// `prompts/list` with only the prompts `keep` accepts (name, upstream), rendered now with
    /// `cacheScope: "private"`.
    pub fn prompts_list_where(&self, era: Era, keep: ListFilter<'_>) -> Result<Bytes, RuntimeError> {
        let prompts =
            self.prompts.iter().filter(|p| keep(&p.descriptor().name, p.upstream())).map(|p| p.descriptor().clone());
        finish(ListPromptsResult::new(prompts.collect()), era, &self.private_rendering())
    }

    /// `resources/list` with only the resources `keep` accepts (URI, upstream), rendered now
    /// with `cacheScope: "private"`.
    pub fn resources_list_where(&self, era: Era, keep: ListFilter<'_>) -> Result<Bytes, RuntimeError> {
        let resources = self
            .resources
            .iter()
            .filter_map(|h| h.resource().map(|r| (h, r)))
            .filter(|(h, r)| keep(&r.uri, h.upstream()))
            .map(|(_, r)| r.clone());
        finish(ListResourcesResult::new(resources.collect()), era, &self.private_rendering())
    }

    /// `resources/templates/list` with only the templates `keep` accepts (URI template,
    /// upstream), rendered now with `cacheScope: "private"`.
    pub fn templates_list_where(&self, era: Era, keep: ListFilter<'_>) -> Result<Bytes, RuntimeError> {
        let templates = self
            .resources
            .iter()
            .filter_map(|h| h.template().map(|t| (h, t)))
            .filter(|(h, t)| keep(&t.uri_template, h.upstream()))
            .map(|(_, t)| t.clone());
        finish(ListResourceTemplatesResult::new(templates.collect()), era, &self.private_rendering())
    }

    fn private_rendering(&self) -> ListRendering {
        ListRendering { cache_scope: CacheScope::Private, ..self.rendering.clone() }
    }

    /// A prompt.
    pub fn prompt(&self, name: &str) -> Option<&Arc<dyn PromptHandler>> {
        self.prompt_index.get(name).map(|&i| &self.prompts[i])
    }

    /// Every resource handler, in registration order.
    pub fn resources(&self) -> &[Arc<dyn ResourceHandler>] {
        &self.resources
    }

    /// Whether any tools, prompts or resources are served (for capabilities).
    pub fn has(&self) -> (bool, bool, bool) {
        if self.advertise_all {
            return (true, true, true);
        }
        (!self.tools.is_empty(), !self.prompts.is_empty(), !self.resources.is_empty())
    }

    /// The pre-rendered list results of an era.
    pub fn lists(&self, era: Era) -> &RenderedLists {
        let lists = match era {
            Era::Modern => &self.modern,
            Era::Legacy => &self.legacy,
        };
        lists.as_ref().unwrap_or_else(|| unreachable!("lists are rendered by CatalogBuilder::build"))
    }

    fn render(&self, era: Era, r: &ListRendering) -> Result<RenderedLists, RuntimeError> {
        let tools = self.tools.iter().map(|t| tool_info(t.tool.descriptor(), era, r)).collect();
        let prompts = self.prompts.iter().map(|p| p.descriptor().clone()).collect();
        let resources = self.resources.iter().filter_map(|h| h.resource().cloned()).collect();
        let resource_templates = self.resources.iter().filter_map(|h| h.template().cloned()).collect();
        Ok(RenderedLists {
            tools: finish(ListToolsResult::new(tools), era, r)?,
            prompts: finish(ListPromptsResult::new(prompts), era, r)?,
            resources: finish(ListResourcesResult::new(resources), era, r)?,
            templates: finish(ListResourceTemplatesResult::new(resource_templates), era, r)?,
        })
    }
}

/// What `tools/list` shows of a tool in `era`.
fn tool_info(d: &ToolDescriptor, era: Era, r: &ListRendering) -> mcpgate_protocol::tool::Tool {
    let mut info = d.info.clone();
    info.execution = (era == Era::Legacy && r.legacy_task_support && d.task_policy != TaskPolicy::Forbidden)
        .then(|| ToolExecution { task_support: Some(d.task_policy.task_support()) });
    info
}

/// Decides whether a list shows an entry, given its name (or URI) and its upstream.
pub type ListFilter<'a> = &'a (dyn Fn(&str, Option<&str>) -> bool + Sync);

/// Cache hints are members of every list result; this trait sets them.
trait Cacheable: McpResult {
    fn set_cache(&mut self, ttl_ms: u64, scope: CacheScope);
}

macro_rules! cacheable {
    ($($t:ty),*) => {$(
        impl Cacheable for $t {
            fn set_cache(&mut self, ttl_ms: u64, scope: CacheScope) {
                self.ttl_ms = Some(ttl_ms);
                self.cache_scope = Some(scope);
            }
        }
    )*};
}
cacheable!(ListToolsResult, ListPromptsResult, ListResourcesResult, ListResourceTemplatesResult);

fn finish<T: Cacheable>(mut result: T, era: Era, r: &ListRendering) -> Result<Bytes, RuntimeError> {
    if era == Era::Modern {
        result.set_cache(r.ttl_ms, r.cache_scope);
        result.set_result_type(Some(ResultType::Complete));
        result.set_meta(Some(ResultMeta::server(r.server_info.clone())));
    }
    serde_json::to_vec(&result)
        .map(Bytes::from)
        .map_err(|e| RuntimeError::Rendering { what: "a list", source: std::sync::Arc::new(e) })
}
