//! The mirrored headers of a 2026-07-28 request (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`,
//! plain or `=?base64?…?=`) against the body they must agree with: any bytes a client can put
//! in a header are accepted or refused, never a panic, and a header that agrees is accepted.
#![no_main]

use axum::http::{HeaderMap, HeaderName, HeaderValue};
use libfuzzer_sys::fuzz_target;
use mcpgate::internals::headers::{check_params, check_routing, mirrored};
use mcpgate_runtime::catalog::header_params;
use serde_json::{Map, Value, json};

fuzz_target!(|input: &[u8]| {
    // Lines of `name:value`; the last line, if JSON, is the call's arguments.
    let mut headers = HeaderMap::new();
    let mut arguments: Option<Map<String, Value>> = None;
    for line in input.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            arguments = serde_json::from_slice(line).ok();
            continue;
        };
        let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(&line[..colon]), HeaderValue::from_bytes(&line[colon + 1..]))
        else {
            continue;
        };
        headers.append(name, value);
    }
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "dry": {"type": "boolean", "x-mcp-header": "Dry"},
    }});
    let Value::Object(schema) = schema else { return };
    let params = header_params::extract("fuzzed", &schema).expect("a valid schema");
    let _ = check_params(&headers, &params, arguments.as_ref());
    for lenient in [false, true] {
        let _ = check_routing(&headers, "tools/call", Some("echo"), lenient);
    }
    for name in ["mcp-method", "mcp-name", "mcp-param-region", "mcp-protocol-version"] {
        // A value that decodes is one a body can agree with.
        if let Ok(Some(value)) = mirrored(&headers, name)
            && name == "mcp-method"
            && headers.get_all(name).iter().count() == 1
        {
            let routing = check_routing(&headers, &value, None, false);
            assert!(routing.is_ok(), "Mcp-Method {value:?} does not agree with itself: {routing:?}");
        }
    }
});
