//! An upstream's tools, prompts and resources as catalog entries: each implements the
//! runtime's trait by forwarding to its upstream, so handlers and task workers run them like
//! any built-in (no `if upstream` anywhere else).
//!
//! Invariant: a failure of the upstream (down, timed out, circuit open, garbage) reaches a
//! tools/call client as a tool result with `isError: true` naming the upstream and the reason,
//! never as a protocol error the model cannot read; the client's credentials are never sent
//! (with token exchange, only the caller's exchanged token is).

use std::sync::Arc;
use std::time::Duration;

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

use mcpgate_protocol::capabilities::TASKS_EXTENSION;
use mcpgate_protocol::meta::CLIENT_CAPABILITIES_KEY;
use mcpgate_protocol::tool::TaskSupport;

use crate::config::ToolOverride;
use crate::connect_ask;
use crate::continuation::Continuation;
use crate::error::UpstreamError;
use crate::input_relay;
use crate::oauth::HeldToken;
use crate::rpc::{self, Progress};
use crate::task_relay::{self, UpstreamTask};
use crate::upstream::{Request, Upstream};

/// Sends a request (with `held`, the caller's token as their call's look-up found it, for an
/// `auth = "oauth"` upstream), relaying progress to the context and the context's cancellation
/// upstream.
/// Inside a gateway task, the server's requests on the call's own stream (a 2025-11-25 server
/// asking mid-call) are asked of the client in place and answered upstream; outside one,
/// nobody could answer them on this replica, so they are refused at once.
async fn forward(
    upstream: &Upstream,
    request: Request,
    held: Option<&HeldToken>,
    cx: &ToolContext,
) -> Result<Box<serde_json::value::RawValue>, UpstreamError> {
    // A progress token makes many servers stream their answer: only when progress goes
    // somewhere. Channels only where they are used (most calls need neither).
    let (sink, mut progress) = channel_if::<Progress>(cx.wants_progress(), 16);
    let (taker, mut questions) = channel_if::<rpc::ServerRequest>(cx.can_checkpoint(), 4);
    let cancel = CancellationToken::new();
    let request = match sink {
        Some(sink) => request.progress(sink),
        None => request,
    };
    let request = match taker {
        Some(taker) => request.questions(taker),
        None => request,
    };
    // For the caller: an upstream with token exchange gets this caller's exchanged token, an
    // `auth = "oauth"` one the caller's own connection's token.
    let request = request.caller(cx.principal()).holding(held);
    let call = upstream.request(request, &cancel);
    tokio::pin!(call);
    let mut cancelled = false;
    // Cancelled while its answer is on its way, a call is given a moment to get it: if the
    // upstream already made a task of it, its id is then known, and the task is cancelled
    // upstream too (`task_relay::track`) instead of being left running there, orphaned.
    let mut grace: Option<std::pin::Pin<Box<tokio::time::Sleep>>> = None;
    loop {
        tokio::select! {
            outcome = &mut call => return outcome,
            Some(p) = receive(&mut progress) => cx.progress(p.progress, p.total, p.message.as_deref()).await,
            Some(asked) = receive(&mut questions) => {
                // Unanswered, it was refused upstream: the server decides how its call ends.
                // Boxed (as the task paths below): rare, and large; a plain call need not carry it.
                if let Err(failure) = Box::pin(task_relay::answer_in_place(upstream, &asked, cx)).await {
                    tracing::debug!(upstream = upstream.name(), ?failure, "an upstream's question went unanswered");
                }
            }
            () = cx.cancelled(), if !cancelled => {
                cancelled = true;
                grace = Some(Box::pin(tokio::time::sleep(ANSWER_GRACE)));
            }
            () = async { if let Some(g) = grace.as_mut() { g.await } }, if grace.is_some() => {
                grace = None;
                cancel.cancel();
            }
        }
    }
}

/// How long a cancelled call waits for an answer already on its way (less than the worker's
/// grace for a cancelled run's tool, so the upstream task can still be cancelled within it).
const ANSWER_GRACE: std::time::Duration = std::time::Duration::from_millis(300);

/// A channel when `wanted`.
fn channel_if<T>(wanted: bool, size: usize) -> (Option<mpsc::Sender<T>>, Option<mpsc::Receiver<T>>) {
    if !wanted {
        return (None, None);
    }
    let (tx, rx) = mpsc::channel(size);
    (Some(tx), Some(rx))
}

/// The next message of a channel that may not exist (`None` at once then: the branch is off).
async fn receive<T>(receiver: &mut Option<mpsc::Receiver<T>>) -> Option<T> {
    match receiver {
        Some(receiver) => receiver.recv().await,
        None => None,
    }
}

/// The params of a call of `remote` (a tool or prompt, named by `key`): the arguments it is
/// sent and the input capabilities the client declared.
fn call_params(key: &str, remote: &str, arguments: &Value, cx: &ToolContext) -> Result<Map<String, Value>, Failure> {
    let mut params = Map::new();
    params.insert(key.to_owned(), Value::String(remote.to_owned()));
    params.insert("arguments".to_owned(), arguments.clone());
    if let Some(capabilities) = input_relay::declared_upstream(cx.capabilities()) {
        params.insert("_meta".to_owned(), json!({ CLIENT_CAPABILITIES_KEY: capabilities }));
    }
    Ok(params)
}

/// An upstream tool under its exposed name.
pub struct UpstreamTool {
    upstream: Arc<Upstream>,
    /// The upstream's own name for it.
    remote: String,
    descriptor: ToolDescriptor,
    header_params: Vec<HeaderParam>,
    /// The task support the upstream lists for it (2025-11-25 `execution.taskSupport`).
    upstream_tasks: TaskSupport,
    /// The operator's override of it: applied to the arguments of every call, whichever
    /// replica runs it (a task stores the caller's arguments, never the merged ones).
    overridden: Option<Arc<ToolOverride>>,
}

impl UpstreamTool {
    /// A tool exposed as `descriptor` (already renamed and overridden), called upstream as
    /// `remote` with `overridden`'s hidden and default arguments.
    pub(crate) fn new(
        upstream: Arc<Upstream>,
        remote: String,
        descriptor: ToolDescriptor,
        header_params: Vec<HeaderParam>,
        upstream_tasks: TaskSupport,
        overridden: Option<Arc<ToolOverride>>,
    ) -> Self {
        Self { upstream, remote, descriptor, header_params, upstream_tasks, overridden }
    }

    /// The caller's arguments refused when they name a hidden one (the operator fixed it, and
    /// it is not in the schema the caller was given): invalid params naming it.
    fn refuse_hidden(&self, arguments: &Value) -> Result<(), Failure> {
        match &self.overridden {
            Some(o) => o
                .check(arguments)
                .map_err(|why| Failure::InvalidParams(format!("{}: {why}", self.descriptor.info.name))),
            None => Ok(()),
        }
    }

    /// What is sent upstream for the caller's arguments: defaults, then hidden values, merged in.
    fn upstream_arguments(&self, arguments: &Value) -> Value {
        self.overridden.as_ref().map_or_else(|| arguments.clone(), |o| o.arguments(arguments))
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

/// Times one call follows an upstream's state-only results (its replicas handing the call on)
/// before relaying what it got; bounded so two upstream replicas cannot bounce a call forever.
const MAX_HAND_OFFS: u32 = 16;

impl Tool for UpstreamTool {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        self.refuse_hidden(arguments)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        self.call_holding(call, cx, None)
    }
}

impl UpstreamTool {
    /// [`Tool::call`], its requests going with `held` (an `auth = "oauth"` upstream's caller's
    /// token, as the look-up that found this tool for them found it).
    pub(crate) fn call_holding<'a>(
        &'a self,
        call: ToolCall,
        cx: &'a ToolContext,
        held: Option<&'a HeldToken>,
    ) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let name = self.upstream.name();
            if let Err(failure) = self.refuse_hidden(&call.arguments) {
                return Outcome::Failed(failure);
            }
            let round = match Continuation::of(&call, name) {
                // Tracking an upstream task (a resumed run, or answers to its input round).
                Ok(Some(Continuation::Task { task_id, legacy, keys, round, .. })) => {
                    let task = UpstreamTask { id: task_id, legacy, poll: Duration::from_millis(100) };
                    return Box::pin(task_relay::track(&self.upstream, task, &keys, round, &call, cx)).await;
                }
                // The caller was asked to connect: unless they declined, the call goes on anew.
                Ok(Some(Continuation::Connect { key, .. })) => {
                    if let Some(declined) = connect_ask::declined(name, &key, &call) {
                        return declined;
                    }
                    None
                }
                Ok(round) => round,
                Err(failure) => return Outcome::Failed(failure),
            };
            // Inside a gateway task an upstream task is welcome (tracked, checkpointed); a
            // synchronous call asks for one only when the tool requires it.
            let mut want_task = cx.can_checkpoint() || self.upstream_tasks == TaskSupport::Required;
            // The state of a result that handed the call on (see `input_relay::handed_on`).
            let mut handed: Option<String> = None;
            let mut hand_offs = 0;
            let arguments = self.upstream_arguments(&call.arguments);
            loop {
                let params = match handed.take() {
                    Some(state) => call_params("name", &self.remote, &arguments, cx).map(|mut params| {
                        params.insert("requestState".to_owned(), Value::String(state));
                        params
                    }),
                    None => self.params(&arguments, &call, round.as_ref(), cx),
                };
                let params = match params {
                    Ok(params) => params,
                    Err(failure) => return Outcome::Failed(failure),
                };
                match self.call_once(params, want_task, held, cx).await {
                    // A 2026-07-28 tool that runs only as a task: ask again, and track it.
                    Err(UpstreamError::Rpc { code: -32021, message })
                        if !want_task && message_names_tasks(&message) =>
                    {
                        want_task = true;
                    }
                    Ok(raw) => {
                        if hand_offs < MAX_HAND_OFFS
                            && let Some(state) = input_relay::handed_on(&raw)
                        {
                            hand_offs += 1;
                            handed = Some(state);
                            continue;
                        }
                        let rounds = round.as_ref().map_or(0, Continuation::round);
                        return self.relay(&raw, rounds, &call, cx).await;
                    }
                    // The upstream refused the arguments (an upstream older than SEP-1303 says so
                    // with -32602): the model must see it, like a refusal of ours.
                    Err(UpstreamError::Rpc { code: -32602, message }) => {
                        return Outcome::Failed(Failure::InvalidArguments(format!(
                            "{}: {message}",
                            self.descriptor.info.name
                        )));
                    }
                    // The caller is gone (or the task stopped): nobody reads a result.
                    Err(UpstreamError::Cancelled) => {
                        return Outcome::Failed(Failure::Unavailable("cancelled".to_owned()));
                    }
                    Err(UpstreamError::ConnectionRequired { upstream, url, elicitation_id }) => {
                        return connect_ask::ask_to_connect(&upstream, &url, &elicitation_id, cx);
                    }
                    Err(e) => {
                        return Outcome::Complete(CallToolResult::error(format!(
                            "Upstream {name}: {}",
                            e.client_text()
                        )));
                    }
                }
            }
        })
    }

    /// The params of this call: `arguments` (as sent upstream), and a round's answers and
    /// state on a retry.
    fn params(
        &self,
        arguments: &Value,
        call: &ToolCall,
        round: Option<&Continuation>,
        cx: &ToolContext,
    ) -> Result<Map<String, Value>, Failure> {
        let mut params = call_params("name", &self.remote, arguments, cx)?;
        if let Some(Continuation::Round { keys, state, round, .. }) = round {
            input_relay::continue_round(&mut params, call, keys, state.as_deref(), *round)?;
        }
        Ok(params)
    }

    /// One `tools/call` upstream, asking for a task when `want_task`.
    async fn call_once(
        &self,
        mut params: Map<String, Value>,
        want_task: bool,
        held: Option<&HeldToken>,
        cx: &ToolContext,
    ) -> Result<Box<serde_json::value::RawValue>, UpstreamError> {
        if want_task {
            // Both eras' ways of asking: 2026-07-28 servers ignore `task`, and 2025-11-25 ones
            // the extension in `_meta`; `task` only where the upstream lists task support.
            let meta = params.entry("_meta").or_insert_with(|| json!({}));
            meta[CLIENT_CAPABILITIES_KEY]["extensions"][TASKS_EXTENSION] = json!({});
            if self.upstream_tasks != TaskSupport::Forbidden {
                params.insert("task".to_owned(), json!({}));
            }
        }
        // Mirrored from what the upstream is sent (hidden and default values included).
        let headers = self.mirrored(params.get("arguments").unwrap_or(&Value::Null));
        let request = Request::new("tools/call", Value::Object(params)).name(&self.remote).param_headers(headers);
        forward(&self.upstream, request, held, cx).await
    }

    /// What a `tools/call` answer becomes: the result relayed as sent (only the envelope is
    /// parsed, content passes byte for byte), an input round, or an upstream task tracked.
    /// `rounds`: the input rounds the call had so far.
    async fn relay(
        &self,
        raw: &serde_json::value::RawValue,
        rounds: u32,
        call: &ToolCall,
        cx: &ToolContext,
    ) -> Outcome<CallToolResult> {
        let name = self.upstream.name();
        let r = match RawMembers::split(raw.get()) {
            Ok(r) => r,
            Err(e) => {
                return Outcome::Complete(CallToolResult::error(format!(
                    "Upstream {name} returned a tool result mcpgate cannot read: {}",
                    rpc::clip(&e.to_string())
                )));
            }
        };
        if let Some(task) = UpstreamTask::created(r.result_type.as_deref(), &r.members) {
            return match task {
                Ok(task) => Box::pin(task_relay::track(&self.upstream, task, &[], rounds, call, cx)).await,
                Err(why) => Outcome::Complete(CallToolResult::error(format!("Upstream {name} answered with {why}"))),
            };
        }
        match r.result_type.as_deref() {
            None | Some("complete") if r.members.has("content") => {
                Outcome::Complete(CallToolResult::relayed(r.members, r.is_error))
            }
            Some("input_required") => input_relay::ask(name, &r.members, rounds + 1).unwrap_or_else(|why| {
                Outcome::Complete(CallToolResult::error(format!("Upstream {name} asked for {why}")))
            }),
            other => Outcome::Complete(CallToolResult::error(format!(
                "Upstream {name} answered with a {} result, which mcpgate does not relay",
                other.map_or("content-less".to_owned(), rpc::clip)
            ))),
        }
    }
}

/// Whether a `-32021` error is about the tasks extension (the tool runs only as a task).
fn message_names_tasks(message: &str) -> bool {
    message.contains("task")
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
        e => Failure::Unavailable(format!("Upstream {}: {}", upstream.name(), e.client_text())),
    }
}

impl PromptHandler for UpstreamPrompt {
    fn descriptor(&self) -> &Prompt {
        &self.descriptor
    }

    fn upstream(&self) -> Option<&str> {
        Some(self.upstream.name())
    }

    fn get<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<GetPromptResult>> {
        Box::pin(async move {
            let name = self.upstream.name();
            let mut params = match call_params("name", &self.remote, &call.arguments, cx) {
                Ok(params) => params,
                Err(failure) => return Outcome::Failed(failure),
            };
            let rounds = match Continuation::of(&call, name) {
                Ok(Some(Continuation::Round { keys, state, round, .. })) => {
                    if let Err(failure) =
                        input_relay::continue_round(&mut params, &call, &keys, state.as_deref(), round)
                    {
                        return Outcome::Failed(failure);
                    }
                    round
                }
                Ok(_) => 0,
                Err(failure) => return Outcome::Failed(failure),
            };
            let request = Request::new("prompts/get", Value::Object(params)).name(&self.remote);
            match forward(&self.upstream, request, None, cx).await {
                Ok(raw) if asks_input(&raw) => match RawMembers::split(raw.get()) {
                    Ok(r) => input_relay::ask(name, &r.members, rounds + 1).unwrap_or_else(|why| {
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
    fn upstream(&self) -> Option<&str> {
        Some(self.upstream.name())
    }

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
            match forward(&self.upstream, request, None, cx).await {
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
