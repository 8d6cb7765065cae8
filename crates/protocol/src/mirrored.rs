//! Mirrored request headers of 2026-07-28 (SEP-2243): which headers a request repeats from its
//! body (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), so intermediaries can route without parsing
//! it, and how a value travels in a header: as it is when it is plain visible ASCII, otherwise
//! as `=?base64?<base64 of its UTF-8>?=`.
//!
//! Invariants: `decode(encode(v)) == v` for every string `v`; a value that looks like the
//! sentinel is always encoded, so a plain value is never mistaken for one; a malformed
//! sentinel (bad base64, not UTF-8) is an error, never taken literally.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use crate::error::ProtocolError;
use crate::headers::{MCP_METHOD, MCP_NAME, MCP_PARAM_PREFIX};
use crate::method::Method;

const SENTINEL_START: &str = "=?base64?";
const SENTINEL_END: &str = "?=";

/// The member of `params` that `Mcp-Name` mirrors for `method`: `name` for `tools/call` and
/// `prompts/get`, `uri` for `resources/read`, `taskId` for the tasks extension's `tasks/get`,
/// `tasks/update` and `tasks/cancel`; `None` for a method that carries no `Mcp-Name`.
pub fn name_member(method: &str) -> Option<&'static str> {
    match Method::parse(method)? {
        Method::ToolsCall | Method::PromptsGet => Some("name"),
        Method::ResourcesRead => Some("uri"),
        Method::TasksGet | Method::TasksUpdate | Method::TasksCancel => Some("taskId"),
        _ => None,
    }
}

/// The value `Mcp-Name` mirrors for a request (see [`name_member`]), decoded; `None` when the
/// method has none or the params lack it (or it is not a string).
pub fn name<'a>(method: &str, params: &'a Value) -> Option<&'a str> {
    params.get(name_member(method)?)?.as_str()
}

/// The mirrored headers of a 2026-07-28 request, values encoded for the wire: `Mcp-Method`
/// always, `Mcp-Name` when [`name`] finds one. (`MCP-Protocol-Version` and `Mcp-Param-*` are
/// the sender's to add: they depend on the version it speaks and on the tool's schema.)
pub fn routing_headers(method: &str, params: &Value) -> Vec<(&'static str, String)> {
    let mut headers = vec![(MCP_METHOD, encode(method).into_owned())];
    if let Some(name) = name(method, params) {
        headers.push((MCP_NAME, encode(name).into_owned()));
    }
    headers
}

/// The name of the header mirroring an argument annotated `x-mcp-header: <annotation>`:
/// `mcp-param-<annotation>`.
pub fn param_header(annotation: &str) -> String {
    format!("{MCP_PARAM_PREFIX}{annotation}")
}

/// The text an argument is mirrored as (not yet encoded): a string as it is, a number in
/// decimal, a boolean as `true` / `false`; `None` for anything else (`null` included: the
/// header is then omitted).
pub fn param_text(argument: &Value) -> Option<String> {
    match argument {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A value as a header carries it: unchanged when it is non-empty visible ASCII with no
/// leading or trailing space and does not start like the sentinel, otherwise
/// `=?base64?…?=` (standard alphabet, padded).
pub fn encode(value: &str) -> Cow<'_, str> {
    let plain = !value.is_empty()
        && value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !value.starts_with("=?");
    if plain {
        Cow::Borrowed(value)
    } else {
        Cow::Owned(format!("{SENTINEL_START}{}{SENTINEL_END}", STANDARD.encode(value)))
    }
}

/// The value a header carries, from its raw bytes: optional whitespace (spaces, tabs) around
/// it trimmed, the sentinel form decoded (strict RFC 4648 base64 of UTF-8).
///
/// # Errors
///
/// [`ProtocolError::HeaderValue`] when the bytes are not visible ASCII (tab allowed), or the
/// sentinel holds invalid base64 or bytes that are not UTF-8.
pub fn decode(raw: &[u8]) -> Result<String, ProtocolError> {
    let fail = |problem| ProtocolError::HeaderValue { problem };
    if !raw.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b)) {
        return Err(fail("contains characters that are not visible ASCII"));
    }
    // Visible ASCII, checked above, is UTF-8.
    let text = std::str::from_utf8(raw).map_err(|_| fail("contains characters that are not visible ASCII"))?;
    let text = text.trim_matches([' ', '\t']);
    match text.strip_prefix(SENTINEL_START).and_then(|rest| rest.strip_suffix(SENTINEL_END)) {
        Some(encoded) => {
            let bytes = STANDARD.decode(encoded).map_err(|_| fail("has an invalid base64 value"))?;
            String::from_utf8(bytes).map_err(|_| fail("base64 value is not UTF-8"))
        }
        None => Ok(text.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    #[test]
    fn plain_values_stay_plain_and_others_are_encoded() {
        assert_eq!(encode("get_weather"), "get_weather");
        assert_eq!(encode("test://static text"), "test://static text");
        assert_eq!(encode("héllo"), "=?base64?aMOpbGxv?=");
        assert_eq!(encode(" x"), "=?base64?IHg=?=");
        assert_eq!(encode("x "), "=?base64?eCA=?=");
        assert_eq!(encode("a\tb"), "=?base64?YQli?=");
        assert_eq!(encode("=?base64?SGVsbG8=?="), "=?base64?PT9iYXNlNjQ/U0dWc2JHOD0/PQ==?=", "the sentinel itself");
        assert_eq!(encode("=?x"), "=?base64?PT94?=");
        assert_eq!(encode(""), "=?base64??=");
    }

    #[test]
    fn decoding_trims_and_opens_the_sentinel() {
        assert_eq!(decode(b"=?base64?SGVsbG8=?=").as_deref(), Ok("Hello"));
        assert_eq!(decode(b"  plain\t ").as_deref(), Ok("plain"));
        assert_eq!(decode(b" =?base64?SGVsbG8=?=\t").as_deref(), Ok("Hello"), "whitespace around the sentinel");
        assert_eq!(decode(b"=?base64?SGVsbG8=").as_deref(), Ok("=?base64?SGVsbG8="), "no end marker: plain");
        assert_eq!(decode(b"=?BASE64?SGVsbG8=?=").as_deref(), Ok("=?BASE64?SGVsbG8=?="), "markers are lowercase");
        assert_eq!(decode(b"=?base64??=").as_deref(), Ok(""));
    }

    #[test]
    fn malformed_values_are_errors() {
        let problem = |raw: &[u8]| match decode(raw) {
            Err(ProtocolError::HeaderValue { problem }) => problem,
            other => panic!("{raw:?} decoded: {other:?}"),
        };
        assert_eq!(problem(b"=?base64?SGVsbG8?="), "has an invalid base64 value", "missing padding");
        assert_eq!(problem(b"=?base64?SGVs!!!bG8=?="), "has an invalid base64 value", "bad alphabet");
        assert_eq!(problem(b"=?base64?SGVsbG9=?="), "has an invalid base64 value", "non-canonical trailing bits");
        assert_eq!(problem(b"=?base64?/w==?="), "base64 value is not UTF-8");
        assert_eq!(problem("héllo".as_bytes()), "contains characters that are not visible ASCII");
        assert_eq!(problem(b"a\x7fb"), "contains characters that are not visible ASCII");
        assert_eq!(problem(b"a\nb"), "contains characters that are not visible ASCII");
    }

    #[test]
    fn the_name_follows_the_method() {
        let params = json!({"name": "echo", "uri": "test://x", "taskId": "t1"});
        assert_eq!(name("tools/call", &params), Some("echo"));
        assert_eq!(name("prompts/get", &params), Some("echo"));
        assert_eq!(name("resources/read", &params), Some("test://x"));
        for method in ["tasks/get", "tasks/update", "tasks/cancel"] {
            assert_eq!(name(method, &params), Some("t1"), "{method}");
        }
        for method in ["tools/list", "server/discover", "completion/complete", "tasks/result", "tasks/list", "x/y"] {
            assert_eq!(name(method, &params), None, "{method}");
        }
        assert_eq!(name("tools/call", &json!({"name": 7})), None, "not a string");
        assert_eq!(name("tools/call", &json!({})), None);
        assert_eq!(
            routing_headers("resources/read", &json!({"uri": "file:///ré"})),
            vec![(MCP_METHOD, "resources/read".to_owned()), (MCP_NAME, "=?base64?ZmlsZTovLy9yw6k=?=".to_owned())]
        );
        assert_eq!(routing_headers("tools/list", &json!({})), vec![(MCP_METHOD, "tools/list".to_owned())]);
    }

    #[test]
    fn arguments_mirror_as_text() {
        assert_eq!(param_header("Region"), "mcp-param-Region");
        assert_eq!(param_text(&json!("eu-west")).as_deref(), Some("eu-west"));
        assert_eq!(param_text(&json!(-42)).as_deref(), Some("-42"));
        assert_eq!(param_text(&json!(true)).as_deref(), Some("true"));
        assert_eq!(param_text(&json!(null)), None);
        assert_eq!(param_text(&json!({"a": 1})), None);
    }

    proptest! {
        #[test]
        fn every_string_round_trips(value in any::<String>()) {
            let encoded = encode(&value);
            prop_assert_eq!(decode(encoded.as_bytes()), Ok(value));
        }

        #[test]
        fn decoding_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode(&raw);
        }
    }
}
