//! Mirrored request headers of 2026-07-28 (SEP-2243): `Mcp-Method`, `Mcp-Name` and
//! `Mcp-Param-*` repeat parts of the body so intermediaries can route without parsing it;
//! the server must check that they agree with the body.
//!
//! Invariant: a header value is compared only after trimming optional whitespace and decoding
//! the `=?base64?…?=` form (`mcpgate_protocol::mirrored::decode`: strict RFC 4648 base64 of
//! UTF-8); undecodable values are a mismatch, never silently accepted; a call passes only
//! when every `x-mcp-header` argument and its header agree.

use axum::http::HeaderMap;

use mcpgate_protocol::JsonObject;
use mcpgate_protocol::mirrored::decode as decode_value;
use mcpgate_runtime::catalog::{HeaderParam, ParamKind};

use crate::error::GatewayError;

pub(crate) use mcpgate_protocol::headers::{MCP_METHOD, MCP_NAME, MCP_PROTOCOL_VERSION, MCP_SESSION_ID};

/// The decoded value of a mirrored header, if present; an undecodable one is a mismatch
/// (`<header> <problem>`).
pub fn mirrored(headers: &HeaderMap, name: &str) -> Result<Option<String>, GatewayError> {
    let Some(raw) = headers.get(name) else {
        return Ok(None);
    };
    // Text by design: the client's error message says which header and why, as a whole.
    decode_value(raw.as_bytes()).map(Some).map_err(|e| GatewayError::header_mismatch(format!("{name} {e}")))
}

/// What [`check_routing`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Every mirrored header that must be there is, and agrees with the body.
    Agrees,
    /// `Mcp-Name` is absent where it was allowed to be (`lenient`); the rest agrees.
    NameMissing,
}

/// Checks `Mcp-Method` (always required) and `Mcp-Name` (required when `name` is given,
/// unless `lenient`: then only a mismatch is refused). `lenient` exists for `tasks/*`, whose
/// `Mcp-Name` real clients (FastMCP 4.1) omit; intermediaries routing on it must cope.
pub fn check_routing(
    headers: &HeaderMap,
    method: &str,
    name: Option<&str>,
    lenient: bool,
) -> Result<Routing, GatewayError> {
    match mirrored(headers, MCP_METHOD)? {
        None => {
            return Err(GatewayError::header_mismatch("Mcp-Method header is required"));
        }
        Some(m) if m != method => {
            return Err(GatewayError::header_mismatch("Mcp-Method header does not match the request method"));
        }
        Some(_) => {}
    }
    if let Some(expected) = name {
        match mirrored(headers, MCP_NAME)? {
            None if lenient => return Ok(Routing::NameMissing),
            None => {
                return Err(GatewayError::header_mismatch(format!("Mcp-Name header is required for {method}")));
            }
            Some(n) if n != expected => {
                return Err(GatewayError::header_mismatch("Mcp-Name header does not match the request"));
            }
            Some(_) => {}
        }
    }
    Ok(Routing::Agrees)
}

/// Checks a call's `Mcp-Param-*` headers against its `x-mcp-header` arguments: both absent,
/// or equal after decoding (integers compared numerically).
pub fn check_params(
    headers: &HeaderMap,
    params: &[HeaderParam],
    arguments: Option<&JsonObject>,
) -> Result<(), GatewayError> {
    for p in params {
        let header = mirrored(headers, &p.header)?;
        let value = arguments.and_then(|a| a.get(&p.property)).filter(|v| !v.is_null());
        match (header, value) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(GatewayError::header_mismatch(format!(
                    "{} is required when argument {} is present",
                    p.header, p.property
                )));
            }
            (Some(_), None) => {
                return Err(GatewayError::header_mismatch(format!(
                    "{} is present but argument {} is not",
                    p.header, p.property
                )));
            }
            (Some(h), Some(v)) => {
                let equal = match p.kind {
                    ParamKind::String => v.as_str() == Some(h.as_str()),
                    ParamKind::Integer => v.as_i64().is_some_and(|n| h.parse::<i64>() == Ok(n)),
                    ParamKind::Boolean => v.as_bool().is_some_and(|b| h == if b { "true" } else { "false" }),
                };
                if !equal {
                    return Err(GatewayError::header_mismatch(format!(
                        "{} does not match argument {}",
                        p.header, p.property
                    )));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use axum::http::{HeaderMap, HeaderValue};

    use super::*;

    fn with(name: &'static str, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).expect("valid header"));
        h
    }

    #[test]
    fn decodes_base64_and_trims() {
        assert_eq!(mirrored(&with("x", "=?base64?SGVsbG8=?="), "x").expect("ok").as_deref(), Some("Hello"));
        assert_eq!(mirrored(&with("x", "  plain  "), "x").expect("ok").as_deref(), Some("plain"));
        assert_eq!(mirrored(&with("x", "=?base64?SGVsbG8="), "x").expect("ok").as_deref(), Some("=?base64?SGVsbG8="));
        assert!(mirrored(&with("x", "=?base64?SGVsbG8?="), "x").is_err(), "missing padding");
        assert!(mirrored(&with("x", "=?base64?SGVs!!!bG8=?="), "x").is_err(), "bad alphabet");
        assert!(mirrored(&with("x", "=?base64?/w==?="), "x").is_err(), "not UTF-8");
    }

    #[test]
    fn routing_headers() {
        let mut h = with(MCP_METHOD, "tools/call");
        assert!(check_routing(&h, "tools/call", Some("echo"), false).is_err(), "Mcp-Name missing");
        assert_eq!(check_routing(&h, "tools/call", Some("echo"), true).ok(), Some(Routing::NameMissing));
        h.insert(MCP_NAME, HeaderValue::from_static("  echo "));
        assert_eq!(check_routing(&h, "tools/call", Some("echo"), false).ok(), Some(Routing::Agrees));
        assert!(check_routing(&h, "tools/call", Some("other"), false).is_err());
        assert!(check_routing(&h, "tools/call", Some("other"), true).is_err(), "a mismatch is refused even then");
        assert!(check_routing(&h, "TOOLS/CALL", None, false).is_err(), "values are case-sensitive");
    }
}
