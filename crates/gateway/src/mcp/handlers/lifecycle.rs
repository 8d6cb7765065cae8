//! `server/discover` (modern), `initialize` and `ping` (legacy).

use bytes::Bytes;

use mcpgate_protocol::initialize::{InitializeParams, InitializeResult};
use mcpgate_protocol::result::EmptyResult;
use mcpgate_protocol::{Era, ProtocolVersion};

use crate::call_context::CallContext;
use crate::config::AuthMode;
use crate::error::GatewayError;
use crate::mcp::render;
use crate::mcp::session::{self, Session};
use crate::mcp::work::Reply;
use crate::servers::legacy_capabilities;
use crate::state::AppState;

/// Legacy handshake: negotiates a version and seals the session into its id.
pub(in crate::mcp) fn initialize(
    state: &AppState,
    cx: &CallContext,
    params: InitializeParams,
) -> Result<Reply, GatewayError> {
    let version = ProtocolVersion::negotiate_legacy(&params.protocol_version);
    let session = Session {
        version: version.as_str().to_owned(),
        capabilities: params.capabilities,
        client_info: Some(params.client_info),
        server: cx.endpoint.server().map(str::to_owned),
    };
    let session_id = session::mint(&state.sealer, &cx.principal, &session, state.config.seal.session_ttl_secs)?;
    let result = InitializeResult {
        protocol_version: version.as_str().to_owned(),
        capabilities: legacy_capabilities(
            cx.endpoint.has(&state.catalog.load()),
            version,
            state.config.auth.mode != AuthMode::None,
        ),
        server_info: (**cx.endpoint.server_info()).clone(),
        instructions: cx.endpoint.instructions().map(str::to_owned),
        result_type: None,
        meta: None,
    };
    let result =
        serde_json::to_vec(&result).map(Bytes::from).map_err(|e| GatewayError::internal_caused("initialize", e))?;
    tracing::debug!(principal = %cx.principal.log_id(), version = %version, "legacy session initialized");
    Ok(Reply::Initialized { result, session_id })
}

/// Legacy liveness check: an empty result.
pub(in crate::mcp) fn ping(cx: &CallContext) -> Result<Bytes, GatewayError> {
    debug_assert_eq!(cx.era, Era::Legacy);
    render::complete(cx, EmptyResult::default())
}
