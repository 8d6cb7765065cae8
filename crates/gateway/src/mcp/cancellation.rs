//! A 2025-11-25 client's `notifications/cancelled` reaches the replica running the request
//! it names, wherever the load balancer sent each: the notification is published on the event
//! bus under an id derived from (principal, session, request id), which the replica streaming
//! that request subscribed to before starting it.
//!
//! Threat model: only the same principal holding the same session id can name the channel
//! (both go into the digest; the session id is the client's own sealed token), so no client
//! can cancel another's request; a forged notification reaches a channel nobody listens on.

use serde::Deserialize;
use serde_json::value::RawValue;

use mcpgate_protocol::jsonrpc::RequestId;
use mcpgate_runtime::Principal;
use mcpgate_store::TaskId;

/// The event channel of one in-flight legacy request.
pub(crate) fn channel(principal: &Principal, session: &[u8; 32], request: &RequestId) -> TaskId {
    let request = match request {
        RequestId::Number(n) => format!("n:{n}"),
        RequestId::String(s) => format!("s:{s}"),
    };
    let digest = mcpgate_seal::context_digest(&[b"cancel", principal.key().as_bytes(), session, request.as_bytes()]);
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    TaskId::derived(bytes)
}

/// The request a `notifications/cancelled` names, if its params are well formed.
pub(crate) fn cancelled_request(params: Option<&RawValue>) -> Option<RequestId> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        request_id: RequestId,
    }
    serde_json::from_str::<Params>(params?.get()).ok().map(|p| p.request_id)
}
