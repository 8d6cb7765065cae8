//! Idempotent task creation: which repeated `tools/call` gets the task the first one created.
//!
//! - 2025-11-25: the scope is (principal, session, request id, tool, arguments). A client
//!   retrying a request within its session gets its task back; another session (another agent
//!   run, another user under one anonymous principal) always gets a task of its own, however it
//!   numbers its requests. The session's identity is a digest of its sealed id, which differs
//!   for every `initialize`.
//! - 2026-07-28: there are no sessions, so request ids identify nothing. Only a key the client
//!   chooses deduplicates: the `Idempotency-Key` header (IETF httpapi draft), or
//!   `_meta["io.mcpgate/idempotencyKey"]` for clients that cannot set headers, scoped to the
//!   principal. Without one, every call creates a task. The same key with another tool or other
//!   arguments is refused (-32602), never answered with the first call's task.
//!
//! Invariant: no two principals and no two sessions ever share a task through this path.

use axum::http::HeaderMap;

use mcpgate_protocol::Era;
use mcpgate_store::Idempotency;

use crate::call_context::CallContext;
use crate::error::GatewayError;

/// The request header.
pub(crate) const HEADER: &str = "idempotency-key";
/// Longest key accepted, in bytes.
pub(crate) const MAX_KEY_LEN: usize = 255;

/// The request's idempotency key (header or `_meta`), validated: 1 to [`MAX_KEY_LEN`]
/// visible ASCII characters; the header may carry it as a structured-field string (quoted).
/// Both present and different is an error, as is a malformed key.
pub(crate) fn key(headers: &HeaderMap, meta: Option<String>) -> Result<Option<String>, GatewayError> {
    let header = match headers.get(HEADER) {
        None => None,
        Some(raw) => {
            let text = raw
                .to_str()
                .map_err(|_| GatewayError::invalid_params("Idempotency-Key must be visible ASCII"))?
                .trim_matches([' ', '\t']);
            let unquoted = text.strip_prefix('"').and_then(|t| t.strip_suffix('"')).unwrap_or(text);
            Some(unquoted.to_owned())
        }
    };
    let key = match (header, meta) {
        (Some(h), Some(m)) if h != m => {
            return Err(GatewayError::invalid_params(
                "the Idempotency-Key header and _meta io.mcpgate/idempotencyKey differ",
            ));
        }
        (Some(k), _) | (None, Some(k)) => k,
        (None, None) => return Ok(None),
    };
    if key.is_empty() || key.len() > MAX_KEY_LEN || !key.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(GatewayError::invalid_params(format!(
            "an idempotency key must be 1 to {MAX_KEY_LEN} visible ASCII characters"
        )));
    }
    Ok(Some(key))
}

/// What deduplicates a task creation for `cx` calling `tool` with `arguments` (serialized with
/// sorted keys), or `None` when nothing does.
pub(crate) fn scope(cx: &CallContext, tool: &str, arguments: &str, window_ms: u64) -> Option<Idempotency> {
    if window_ms == 0 {
        return None;
    }
    let owner = cx.principal.key().as_bytes();
    let call = mcpgate_seal::context_digest(&[b"call", tool.as_bytes(), arguments.as_bytes()]);
    let scope = match cx.era {
        Era::Legacy => {
            let session = cx.session?;
            let request_id = serde_json::to_string(&cx.id).unwrap_or_default();
            mcpgate_seal::context_digest(&[b"legacy", owner, &session, request_id.as_bytes(), &call])
        }
        Era::Modern => {
            let key = cx.idempotency_key.as_deref()?;
            // A key is the client's own per endpoint: one used through a virtual server never
            // returns a task of another endpoint (which it could not read there).
            match cx.endpoint.server() {
                None => mcpgate_seal::context_digest(&[b"key", owner, key.as_bytes()]),
                Some(server) => {
                    mcpgate_seal::context_digest(&[b"key", owner, key.as_bytes(), b"server", server.as_bytes()])
                }
            }
        }
    };
    Some(Idempotency { scope, call, window_ms })
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;

    use super::*;

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(HEADER, HeaderValue::from_str(value).expect("valid header"));
        h
    }

    #[test]
    fn keys_from_header_or_meta() {
        assert_eq!(key(&HeaderMap::new(), None).expect("ok"), None);
        assert_eq!(key(&with("abc-1"), None).expect("ok").as_deref(), Some("abc-1"));
        assert_eq!(key(&with("\"abc-1\""), None).expect("ok").as_deref(), Some("abc-1"), "sf-string form");
        assert_eq!(key(&HeaderMap::new(), Some("m".to_owned())).expect("ok").as_deref(), Some("m"));
        assert_eq!(key(&with("same"), Some("same".to_owned())).expect("ok").as_deref(), Some("same"));
        assert!(key(&with("one"), Some("two".to_owned())).is_err(), "header and _meta disagree");
        assert!(key(&with("\"\""), None).is_err(), "empty");
        assert!(key(&with(&"k".repeat(MAX_KEY_LEN + 1)), None).is_err(), "too long");
        assert!(key(&HeaderMap::new(), Some("white space".to_owned())).is_err());
        assert!(key(&HeaderMap::new(), Some("é".to_owned())).is_err());
    }
}
