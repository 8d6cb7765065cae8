//! Admission: decide a request's era from what it carries and apply that era's rules before
//! any handler runs.
//!
//! Modern (2026-07-28) when `_meta` names a protocol version or the `MCP-Protocol-Version`
//! header is a modern one; then, in this order: version header present, required `_meta`
//! keys present, header equal to `_meta`, version supported, `Mcp-Method`/`Mcp-Name` equal to
//! the body (a `tasks/*` request may omit `Mcp-Name`, as some real clients do; a mismatch is
//! still refused), method offered. Legacy otherwise: `initialize` needs nothing else; every other
//! method needs a sealed session id of this principal, and an `MCP-Protocol-Version` header,
//! when sent, must be the session's version.
//!
//! Invariant: nothing from an earlier request is consulted; a request's params are decoded
//! once on the success path (and `_meta` alone is re-read only to rank errors when they fail).

use std::sync::Arc;

use axum::http::HeaderMap;
use serde::Deserialize;

use mcpgate_protocol::completion::CompleteParams;
use mcpgate_protocol::initialize::InitializeParams;
use mcpgate_protocol::jsonrpc::Request;
use mcpgate_protocol::meta::{CLIENT_CAPABILITIES_KEY, PROTOCOL_VERSION_KEY, RequestMeta};
use mcpgate_protocol::pagination::{MetaParams, PaginatedParams};
use mcpgate_protocol::prompt::GetPromptParams;
use mcpgate_protocol::resource::ReadResourceParams;
use mcpgate_protocol::subscription::ListenParams;
use mcpgate_protocol::task::{TaskIdParams, UpdateTaskParams};
use mcpgate_protocol::tool::CallToolParams;
use mcpgate_protocol::{Era, Method, ProtocolError, ProtocolVersion, decode_params};

use super::session;
use crate::call_context::CallContext;
use crate::error::{ErrorReply, GatewayError, clip};
use crate::http::headers::{MCP_PROTOCOL_VERSION, MCP_SESSION_ID, Routing, check_routing};
use crate::servers::Endpoint;
use crate::state::AppState;
use crate::tasks::idempotency;
use mcpgate_runtime::Principal;

/// Params of a method: they carry `_meta`, and maybe the value `Mcp-Name` mirrors.
pub(super) trait Params: for<'de> Deserialize<'de> {
    /// The `_meta` member.
    fn meta_mut(&mut self) -> &mut Option<RequestMeta>;
    /// The member `Mcp-Name` mirrors, if the method has one.
    fn mirrored_name(&self) -> Option<&str> {
        None
    }
}

macro_rules! params {
    ($($t:ty $(=> $name:ident)?),* $(,)?) => {$(
        impl Params for $t {
            fn meta_mut(&mut self) -> &mut Option<RequestMeta> {
                &mut self.meta
            }
            $(fn mirrored_name(&self) -> Option<&str> {
                Some(&self.$name)
            })?
        }
    )*};
}

params!(
    CallToolParams => name,
    GetPromptParams => name,
    ReadResourceParams => uri,
    TaskIdParams => task_id,
    UpdateTaskParams => task_id,
    PaginatedParams,
    MetaParams,
    CompleteParams,
    InitializeParams,
    ListenParams,
);

/// Admits a request for `method` (`None` for an unknown method): returns its context and
/// decoded params, or the error to answer with.
pub(super) fn admit<P: Params>(
    state: &AppState,
    endpoint: &Arc<Endpoint>,
    headers: &HeaderMap,
    principal: Principal,
    request: &Request<'_>,
    method: Option<Method>,
) -> Result<(CallContext, P), ErrorReply> {
    let mut typed: Result<P, ProtocolError> = decode_params(request.params);
    let meta = match &mut typed {
        Ok(params) => Ok(params.meta_mut().take()),
        Err(_) => peek_meta(request),
    };
    let header_version = headers.get(MCP_PROTOCOL_VERSION).map(|v| clip(v.to_str().unwrap_or("\u{fffd}").trim()));
    let claims_version = match &meta {
        Ok(meta) => meta.as_ref().is_some_and(|m| m.protocol_version.is_some()),
        Err(peeked) => peeked.names_version,
    };
    let era = decide_era(claims_version, header_version.as_deref());
    let fail = |error: GatewayError| ErrorReply { error, id: Some(request.id.clone()), era };
    let Some(era) = era else {
        return Err(fail(GatewayError::UnsupportedVersion { requested: header_version.unwrap_or_default() }));
    };
    let mut meta = match meta {
        Ok(meta) => meta.unwrap_or_default(),
        // `_meta` names a version but some member is malformed: say so, rather than "missing".
        Err(peeked) if era == Era::Modern => {
            return Err(fail(GatewayError::InvalidMeta { detail: peeked.problem }));
        }
        Err(_) => RequestMeta::default(),
    };

    let mut session_id = None;
    let mut idempotency_key = None;
    let mut principal = principal;
    let (version, capabilities) = match era {
        Era::Modern => {
            let version = admit_modern(&meta, header_version.as_deref()).map_err(&fail)?;
            // A method this era does not have answers "not found", whatever its headers say.
            let exists = method.is_some_and(|m| m.exists_in(Era::Modern));
            let name = typed.as_ref().ok().filter(|_| exists).and_then(Params::mirrored_name);
            let lenient = method.filter(|_| exists).is_some_and(Method::is_task_method);
            if check_routing(headers, &request.method, name, lenient).map_err(&fail)? == Routing::NameMissing {
                state.metrics.missing_mcp_name();
            }
            idempotency_key = idempotency::key(headers, meta.idempotency_key.take()).map_err(&fail)?;
            (version, Arc::new(meta.client_capabilities.take().unwrap_or_default()))
        }
        Era::Legacy if method == Some(Method::Initialize) => (ProtocolVersion::LATEST_LEGACY, Default::default()),
        Era::Legacy => {
            let (session, id) =
                admit_legacy(state, endpoint, headers, &principal, header_version.as_deref()).map_err(&fail)?;
            principal = session::acting_principal(&state.config, principal, &id);
            session_id = Some(id);
            let version = session.protocol_version().unwrap_or(ProtocolVersion::LATEST_LEGACY);
            (version, Arc::new(session.capabilities))
        }
    };
    let Some(method) = method.filter(|m| m.exists_in(era)) else {
        return Err(fail(GatewayError::MethodNotFound { method: clip(&request.method) }));
    };
    let params = typed.map_err(|e| fail(e.into()))?;
    let cx = CallContext {
        id: request.id.clone(),
        method,
        era,
        version,
        principal,
        capabilities,
        progress_token: meta.progress_token,
        log_level: if era == Era::Modern { meta.log_level } else { None },
        session: session_id,
        idempotency_key,
        endpoint: Arc::clone(endpoint),
    };
    Ok((cx, params))
}

/// What could be read of a `_meta` that did not decode.
struct PeekedMeta {
    /// Whether it names a protocol version.
    names_version: bool,
    problem: String,
}

/// When typed params fail to decode, reads `_meta` on its own: as typed meta if it is valid
/// (`Ok`), else just its version and what is wrong with it (`Err`).
fn peek_meta(request: &Request<'_>) -> Result<Option<RequestMeta>, PeekedMeta> {
    #[derive(Deserialize)]
    struct Loose {
        #[serde(rename = "_meta", default)]
        meta: Option<serde_json::Map<String, serde_json::Value>>,
    }
    let Ok(Loose { meta: Some(raw) }) = decode_params::<Loose>(request.params) else {
        return Ok(None);
    };
    let names_version = raw.get(PROTOCOL_VERSION_KEY).is_some_and(serde_json::Value::is_string);
    match serde_json::from_value::<RequestMeta>(serde_json::Value::Object(raw)) {
        Ok(meta) => Ok(Some(meta)),
        // Text by design: the client's "invalid _meta" message quotes the decoder, clipped.
        Err(e) => Err(PeekedMeta { names_version, problem: clip(&e.to_string()) }),
    }
}

/// Modern if `_meta` names a version or the header is a modern version; legacy if the header
/// is absent or a legacy version; `None` (unsupported) for an unknown header version.
fn decide_era(meta_names_version: bool, header: Option<&str>) -> Option<Era> {
    if meta_names_version {
        return Some(Era::Modern);
    }
    match header {
        None => Some(Era::Legacy),
        Some(h) => ProtocolVersion::parse(h).map(ProtocolVersion::era),
    }
}

fn admit_modern(meta: &RequestMeta, header: Option<&str>) -> Result<ProtocolVersion, GatewayError> {
    let Some(header) = header else {
        return Err(GatewayError::header_mismatch("MCP-Protocol-Version header is required"));
    };
    let mut missing = Vec::new();
    if meta.protocol_version.is_none() {
        missing.push(PROTOCOL_VERSION_KEY);
    }
    if meta.client_capabilities.is_none() {
        missing.push(CLIENT_CAPABILITIES_KEY);
    }
    if !missing.is_empty() {
        return Err(GatewayError::MissingMeta { missing: missing.join(", ") });
    }
    let requested = meta.protocol_version.as_deref().unwrap_or_default();
    if header != requested {
        return Err(GatewayError::header_mismatch("MCP-Protocol-Version header does not match _meta protocolVersion"));
    }
    match ProtocolVersion::parse(requested) {
        Some(v) if v.era() == Era::Modern => Ok(v),
        _ => Err(GatewayError::UnsupportedVersion { requested: clip(requested) }),
    }
}

/// Opens the request's session; returns it and its identity (a digest of the sealed id: every
/// `initialize` seals with a fresh random nonce, so no two sessions share it).
pub(super) fn admit_legacy(
    state: &AppState,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    principal: &Principal,
    header_version: Option<&str>,
) -> Result<(session::Session, [u8; 32]), GatewayError> {
    let token = headers.get(MCP_SESSION_ID).ok_or(GatewayError::SessionRequired)?;
    let token = token.to_str().map_err(|_| GatewayError::SessionNotFound { reason: "not visible ASCII" })?.trim();
    let session = session::open(&state.sealer, &state.metrics, principal, token)?;
    let opened_on = session.server.as_deref().unwrap_or("");
    if opened_on != endpoint.name() {
        let opened_on =
            if opened_on.is_empty() { "the root endpoint".to_owned() } else { format!("virtual server {opened_on:?}") };
        return Err(GatewayError::SessionOfAnotherEndpoint { opened_on: clip(&opened_on) });
    }
    let identity = session::identity(token);
    if let Some(v) = header_version
        && v != session.version
    {
        return Err(GatewayError::LegacyVersionHeader {
            detail: format!(
                "MCP-Protocol-Version {v} differs from the session's negotiated version {}",
                session.version
            ),
        });
    }
    Ok((session, identity))
}
