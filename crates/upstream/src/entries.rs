//! An upstream's tools, prompts and resources as catalog entries: each implements the
//! runtime's trait by forwarding to its upstream, so handlers and task workers run them like
//! any built-in (no `if upstream` anywhere else).
//!
//! Invariant: a failure of the upstream (down, timed out, circuit open, garbage) reaches a
//! tools/call client as a tool result with `isError: true` naming the upstream and the reason,
//! never as a protocol error the model cannot read; the client's credentials are never sent.

use std::sync::Arc;

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use mcpgate_protocol::prompt::{GetPromptResult, Prompt};
use mcpgate_protocol::relayed::RawMembers;
use mcpgate_protocol::resource::{ReadResourceResult, Resource, ResourceTemplate};
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::header_params::{HeaderParam, ParamKind};
use mcpgate_runtime::catalog::{
    BoxFuture, Failure, Outcome, PromptHandler, ResourceHandler, Tool, ToolCall, ToolContext, ToolDescriptor,
    UriTemplate,
};

use mcpgate_protocol::meta::CLIENT_CAPABILITIES_KEY;

use crate::error::UpstreamError;
use crate::input_relay;
use crate::rpc::{self, Progress};
use crate::upstream::{Request, Upstream};

/// Sends a request, relaying progress to the context and the context's cancellation upstream.
async fn forward(
    upstream: &Upstream,
    request: Request,
    cx: &ToolContext,
) -> Result<Box<serde_json::value::RawValue>, UpstreamError> {
    let (sink, mut progress) = mpsc::channel::<Progress>(16);
    let cancel = CancellationToken::new();
    // A progress token makes many servers stream their answer: only when progress goes somewhere.
    let request = if cx.wants_progress() { request.progress(sink) } else { request };
    let call = upstream.request(request, &cancel);
    tokio::pin!(call);
    let mut cancelled = false;
    loop {
        tokio::select! {
            outcome = &mut call => return outcome,
            Some(p) = progress.recv() => cx.progress(p.progress, p.total, p.message.as_deref()).await,
            () = cx.cancelled(), if !cancelled => {
                cancelled = true;
                cancel.cancel();
            }
        }
    }
}

/// The params of a call of `remote` (a tool or prompt, named by `key`): its arguments, the
/// input capabilities the client declared, and on a retry the previous round's answers and
/// the upstream's state.
fn call_params(key: &str, remote: &str, call: &ToolCall, cx: &ToolContext, upstream: &str) -> Result<Value, Failure> {
    let mut params = Map::new();
    params.insert(key.to_owned(), Value::String(remote.to_owned()));
    params.insert("arguments".to_owned(), call.arguments.clone());
    if let Some(capabilities) = input_relay::declared_upstream(cx.capabilities()) {
        params.insert("_meta".to_owned(), json!({ CLIENT_CAPABILITIES_KEY: capabilities }));
    }
    input_relay::continue_round(&mut params, call, upstream)?;
    Ok(Value::Object(params))
}

/// An upstream tool under its exposed name.
pub struct UpstreamTool {
    upstream: Arc<Upstream>,
    /// The upstream's own name for it.
    remote: String,
    descriptor: ToolDescriptor,
    header_params: Vec<HeaderParam>,
}

impl UpstreamTool {
    /// A tool exposed as `descriptor` (already renamed), called upstream as `remote`.
    pub(crate) fn new(
        upstream: Arc<Upstream>,
        remote: String,
        descriptor: ToolDescriptor,
        header_params: Vec<HeaderParam>,
    ) -> Self {
        Self { upstream, remote, descriptor, header_params }
    }

    fn mirrored(&self, arguments: &Value) -> Vec<(String, String)> {
        self.header_params
            .iter()
            .filter_map(|p| {
                let value = arguments.get(&p.property)?;
                let text = match (p.kind, value) {
                    (ParamKind::String, Value::String(s)) => s.clone(),
                    (ParamKind::Integer, Value::Number(n)) => n.to_string(),
                    (ParamKind::Boolean, Value::Bool(b)) => b.to_string(),
                    _ => return None,
                };
                Some((p.header.clone(), text))
            })
            .collect()
    }
}

impl Tool for UpstreamTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let headers = self.mirrored(&call.arguments);
            let name = self.upstream.name();
            let params = match call_params("name", &self.remote, &call, cx, name) {
                Ok(params) => params,
                Err(failure) => return Outcome::Failed(failure),
            };
            let request = Request::new("tools/call", params).name(&self.remote).param_headers(headers);
            match forward(&self.upstream, request, cx).await {
                // Relayed as sent: only the envelope is parsed, content passes byte for byte.
                Ok(raw) => match RawMembers::split(raw.get()) {
                    Ok(r) if r.result_type.as_deref().is_none_or(|t| t == "complete") && r.members.has("content") => {
                        Outcome::Complete(CallToolResult::relayed(r.members, r.is_error))
                    }
                    Ok(r) if r.result_type.as_deref() == Some("input_required") => input_relay::ask(name, &r.members)
                        .unwrap_or_else(|why| {
                            Outcome::Complete(CallToolResult::error(format!("Upstream {name} asked for {why}")))
                        }),
                    Ok(r) => Outcome::Complete(CallToolResult::error(format!(
                        "Upstream {name} answered with a {} result, which mcpgate does not relay yet",
                        r.result_type.as_deref().map_or("content-less".to_owned(), rpc::clip)
                    ))),
                    Err(e) => Outcome::Complete(CallToolResult::error(format!(
                        "Upstream {name} returned a tool result mcpgate cannot read: {}",
                        rpc::clip(&e.to_string())
                    ))),
                },
                Err(UpstreamError::Rpc { code: -32602, message }) => {
                    Outcome::Failed(Failure::InvalidParams(format!("{}: {message}", self.descriptor.info.name)))
                }
                // The caller is gone (or the task stopped): nobody reads a result.
                Err(UpstreamError::Cancelled) => Outcome::Failed(Failure::Unavailable("cancelled".to_owned())),
                Err(e) => Outcome::Complete(CallToolResult::error(format!("Upstream {name}: {e}"))),
            }
        })
    }
}

/// An upstream prompt under its exposed name.
pub struct UpstreamPrompt {
    upstream: Arc<Upstream>,
    remote: String,
    descriptor: Prompt,
}

impl UpstreamPrompt {
    pub(crate) fn new(upstream: Arc<Upstream>, remote: String, descriptor: Prompt) -> Self {
        Self { upstream, remote, descriptor }
    }
}

/// Whether a raw result is an `input_required` round (read cheaply: only when the text says so
/// is the envelope parsed).
fn asks_input(raw: &serde_json::value::RawValue) -> bool {
    raw.get().contains("input_required")
        && RawMembers::split(raw.get()).is_ok_and(|r| r.result_type.as_deref() == Some("input_required"))
}

/// A failed prompt or resource request as the client sees it.
fn failure(upstream: &Upstream, e: UpstreamError) -> Failure {
    match e {
        UpstreamError::Rpc { code: -32602, message } => {
            Failure::InvalidParams(format!("{}: {message}", upstream.name()))
        }
        e => Failure::Unavailable(format!("Upstream {}: {e}", upstream.name())),
    }
}

impl PromptHandler for UpstreamPrompt {
    fn descriptor(&self) -> &Prompt {
        &self.descriptor
    }

    fn get<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<GetPromptResult>> {
        Box::pin(async move {
            let name = self.upstream.name();
            let params = match call_params("name", &self.remote, &call, cx, name) {
                Ok(params) => params,
                Err(failure) => return Outcome::Failed(failure),
            };
            let request = Request::new("prompts/get", params).name(&self.remote);
            match forward(&self.upstream, request, cx).await {
                Ok(raw) if asks_input(&raw) => match RawMembers::split(raw.get()) {
                    Ok(r) => input_relay::ask(name, &r.members).unwrap_or_else(|why| {
                        Outcome::Failed(Failure::Unavailable(format!("Upstream {name} asked for {why}")))
                    }),
                    Err(e) => Outcome::Failed(Failure::Unavailable(format!("Upstream {name}: {e}"))),
                },
                Ok(raw) => serde_json::from_str(raw.get()).map_or_else(
                    |e| {
                        Outcome::Failed(Failure::Unavailable(format!(
                            "Upstream {} returned a prompt mcpgate cannot read: {}",
                            self.upstream.name(),
                            rpc::clip(&e.to_string())
                        )))
                    },
                    Outcome::Complete,
                ),
                Err(e) => Outcome::Failed(failure(&self.upstream, e)),
            }
        })
    }
}

/// An upstream resource (fixed URI) or resource template; URIs pass unchanged.
pub struct UpstreamResource {
    upstream: Arc<Upstream>,
    kind: ResourceKind,
}

enum ResourceKind {
    Fixed(Resource),
    /// A template, its level-1 parse when it has one, and its literal prefix otherwise.
    Template(ResourceTemplate, Option<UriTemplate>, String),
}

impl UpstreamResource {
    pub(crate) fn fixed(upstream: Arc<Upstream>, resource: Resource) -> Self {
        Self { upstream, kind: ResourceKind::Fixed(resource) }
    }

    pub(crate) fn template(upstream: Arc<Upstream>, template: ResourceTemplate) -> Self {
        let parsed = UriTemplate::parse(&template.uri_template);
        let prefix = template.uri_template.split('{').next().unwrap_or_default().to_owned();
        Self { upstream, kind: ResourceKind::Template(template, parsed, prefix) }
    }

    fn serves(&self, uri: &str) -> bool {
        match &self.kind {
            ResourceKind::Fixed(r) => r.uri == uri,
            ResourceKind::Template(_, Some(t), _) => t.matches(uri).is_some(),
            // Templates beyond level 1 (`{+path}`, `{?q}`): routed by their literal prefix.
            ResourceKind::Template(_, None, prefix) => !prefix.is_empty() && uri.starts_with(prefix.as_str()),
        }
    }
}

impl ResourceHandler for UpstreamResource {
    fn resource(&self) -> Option<&Resource> {
        match &self.kind {
            ResourceKind::Fixed(r) => Some(r),
            ResourceKind::Template(..) => None,
        }
    }

    fn template(&self) -> Option<&ResourceTemplate> {
        match &self.kind {
            ResourceKind::Template(t, ..) => Some(t),
            ResourceKind::Fixed(_) => None,
        }
    }

    fn read<'a>(&'a self, uri: &'a str, cx: &'a ToolContext) -> Option<BoxFuture<'a, Outcome<ReadResourceResult>>> {
        if !self.serves(uri) {
            return None;
        }
        Some(Box::pin(async move {
            let request = Request::new("resources/read", json!({ "uri": uri })).name(uri);
            match forward(&self.upstream, request, cx).await {
                Ok(raw) => match serde_json::from_str::<ReadResourceResult>(raw.get()) {
                    // The upstream's cache hints are its own; the gateway sets its own.
                    Ok(mut result) => {
                        result.ttl_ms = None;
                        result.cache_scope = None;
                        Outcome::Complete(result)
                    }
                    Err(e) => Outcome::Failed(Failure::Unavailable(format!(
                        "Upstream {} returned contents mcpgate cannot read: {}",
                        self.upstream.name(),
                        rpc::clip(&e.to_string())
                    ))),
                },
                Err(UpstreamError::Rpc { code: -32002, .. }) => {
                    Outcome::Failed(Failure::ResourceNotFound(uri.to_owned()))
                }
                Err(e) => Outcome::Failed(failure(&self.upstream, e)),
            }
        }))
    }
}
