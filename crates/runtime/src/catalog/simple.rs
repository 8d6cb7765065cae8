//! Ready-made handlers for the common shapes: a tool or prompt backed by a plain function, a
//! fixed resource, and a resource template backed by a function.

use std::collections::BTreeMap;

use mcpgate_protocol::content::ResourceContents;
use mcpgate_protocol::prompt::{GetPromptResult, Prompt};
use mcpgate_protocol::resource::{ReadResourceResult, Resource, ResourceTemplate};
use mcpgate_protocol::result::CacheScope;
use mcpgate_protocol::tool::CallToolResult;

use super::context::ToolContext;
use super::outcome::Outcome;
use super::prompt::PromptHandler;
use super::resource::{ResourceHandler, UriTemplate};
use super::tool::{BoxFuture, Tool, ToolCall, ToolDescriptor};

/// A synchronous tool function.
pub(super) type ToolFn = Box<dyn Fn(&ToolCall, &ToolContext) -> Outcome<CallToolResult> + Send + Sync>;

/// A tool whose work is one synchronous function.
pub struct FnTool {
    descriptor: ToolDescriptor,
    f: ToolFn,
}

impl FnTool {
    /// A tool from a descriptor and a function.
    pub fn new(
        descriptor: ToolDescriptor,
        f: impl Fn(&ToolCall, &ToolContext) -> Outcome<CallToolResult> + Send + Sync + 'static,
    ) -> Self {
        Self { descriptor, f: Box::new(f) }
    }
}

impl Tool for FnTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        let outcome = (self.f)(&call, cx);
        Box::pin(async move { outcome })
    }
}

/// A synchronous prompt function; `call.arguments` is a JSON object of strings.
pub(super) type PromptFn = fn(&ToolCall, &ToolContext) -> Outcome<GetPromptResult>;
/// A completion function: (argument, typed value) → values.
pub(super) type CompleteFn = fn(&str, &str) -> Vec<String>;

/// A prompt rendered by one synchronous function.
pub struct FnPrompt {
    descriptor: Prompt,
    f: PromptFn,
    complete: Option<CompleteFn>,
}

impl FnPrompt {
    /// A prompt from a descriptor and a function.
    pub fn new(descriptor: Prompt, f: PromptFn) -> Self {
        Self { descriptor, f, complete: None }
    }

    /// Adds argument completion.
    #[must_use]
    pub fn with_completion(mut self, complete: CompleteFn) -> Self {
        self.complete = Some(complete);
        self
    }
}

impl PromptHandler for FnPrompt {
    fn descriptor(&self) -> &Prompt {
        &self.descriptor
    }

    fn get<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<GetPromptResult>> {
        let outcome = (self.f)(&call, cx);
        Box::pin(async move { outcome })
    }

    fn complete(&self, argument: &str, value: &str, _context: &BTreeMap<String, String>) -> Vec<String> {
        self.complete.map(|f| f(argument, value)).unwrap_or_default()
    }
}

/// A resource with fixed contents.
pub struct StaticResource {
    resource: Resource,
    contents: Vec<ResourceContents>,
    ttl_ms: u64,
}

impl StaticResource {
    /// A fixed resource whose reads may be cached publicly for `ttl_ms`.
    pub fn new(resource: Resource, contents: Vec<ResourceContents>, ttl_ms: u64) -> Self {
        Self { resource, contents, ttl_ms }
    }
}

impl ResourceHandler for StaticResource {
    fn resource(&self) -> Option<&Resource> {
        Some(&self.resource)
    }

    fn read<'a>(&'a self, uri: &'a str, _cx: &'a ToolContext) -> Option<BoxFuture<'a, Outcome<ReadResourceResult>>> {
        if uri != self.resource.uri {
            return None;
        }
        let result = ReadResourceResult {
            contents: self.contents.clone(),
            ttl_ms: Some(self.ttl_ms),
            cache_scope: Some(CacheScope::Public),
            ..Default::default()
        };
        Some(Box::pin(async move { Outcome::Complete(result) }))
    }
}

/// Reads one member of a template family: (uri, variables) → contents.
pub(super) type TemplateReadFn = fn(&str, &BTreeMap<String, String>) -> Outcome<Vec<ResourceContents>>;

/// A family of resources behind a URI template.
pub struct TemplateResource {
    template: ResourceTemplate,
    parsed: UriTemplate,
    read: TemplateReadFn,
    complete: Option<CompleteFn>,
}

impl TemplateResource {
    /// A template family; `None` if the template does not parse.
    pub fn new(template: ResourceTemplate, read: TemplateReadFn) -> Option<Self> {
        let parsed = UriTemplate::parse(&template.uri_template)?;
        Some(Self { template, parsed, read, complete: None })
    }

    /// Adds variable completion.
    #[must_use]
    pub fn with_completion(mut self, complete: CompleteFn) -> Self {
        self.complete = Some(complete);
        self
    }
}

impl ResourceHandler for TemplateResource {
    fn template(&self) -> Option<&ResourceTemplate> {
        Some(&self.template)
    }

    fn read<'a>(&'a self, uri: &'a str, _cx: &'a ToolContext) -> Option<BoxFuture<'a, Outcome<ReadResourceResult>>> {
        let vars = self.parsed.matches(uri)?;
        let outcome = match (self.read)(uri, &vars) {
            Outcome::Complete(contents) => Outcome::Complete(ReadResourceResult {
                contents,
                ttl_ms: Some(0),
                cache_scope: Some(CacheScope::Private),
                ..Default::default()
            }),
            Outcome::NeedInput { requests, state } => Outcome::NeedInput { requests, state },
            Outcome::Failed(f) => Outcome::Failed(f),
        };
        Some(Box::pin(async move { outcome }))
    }

    fn complete(&self, variable: &str, value: &str) -> Vec<String> {
        self.complete.map(|f| f(variable, value)).unwrap_or_default()
    }
}
