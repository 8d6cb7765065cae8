//! `x-mcp-header` annotations (SEP-2243): which tool arguments a modern client mirrors into
//! `Mcp-Param-*` headers, validated when a tool is registered (the HTTP layer checks them
//! against every call).
//!
//! Invariant: a registered tool's annotations are valid: top-level string/integer/boolean
//! properties, HTTP-token names, unique case-insensitively.

use serde_json::Value;

use mcpgate_protocol::JsonObject;

use crate::error::RuntimeError;

/// How an annotated argument is compared with its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamKind {
    /// Compared as text.
    String,
    /// Compared numerically.
    Integer,
    /// `true` / `false`.
    Boolean,
}

/// One mirrored argument.
#[derive(Debug, Clone)]
pub struct HeaderParam {
    /// The header, e.g. `Mcp-Param-Region`.
    pub header: String,
    /// The argument it mirrors.
    pub property: String,
    /// How values compare.
    pub kind: ParamKind,
}

/// Extracts and validates the annotations of a tool's input schema.
pub fn extract(tool: &str, schema: &JsonObject) -> Result<Vec<HeaderParam>, RuntimeError> {
    let bad = |problem: String| RuntimeError::Registration { what: format!("registering tool {tool}"), problem };
    let mut params: Vec<HeaderParam> = Vec::new();
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return Ok(params);
    };
    for (property, def) in properties {
        let Some(name) = def.get("x-mcp-header") else {
            continue;
        };
        let name = name.as_str().ok_or_else(|| bad(format!("x-mcp-header of {property} must be a string")))?;
        if name.is_empty() || !name.bytes().all(is_token_byte) {
            return Err(bad(format!("x-mcp-header {name:?} of {property} is not an HTTP token")));
        }
        let kind = match def.get("type").and_then(Value::as_str) {
            Some("string") => ParamKind::String,
            Some("integer") => ParamKind::Integer,
            Some("boolean") => ParamKind::Boolean,
            other => {
                return Err(bad(format!(
                    "x-mcp-header property {property} has type {other:?}; only string, integer or boolean may be mirrored"
                )));
            }
        };
        let header = format!("Mcp-Param-{name}");
        if params.iter().any(|p| p.header.eq_ignore_ascii_case(&header)) {
            return Err(bad(format!("x-mcp-header {name:?} is used twice")));
        }
        params.push(HeaderParam { header, property: property.clone(), kind });
    }
    Ok(params)
}

fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::extract;

    fn schema(v: serde_json::Value) -> mcpgate_protocol::JsonObject {
        v.as_object().cloned().expect("object")
    }

    #[test]
    fn rejects_invalid_annotations() {
        let number = schema(json!({"type":"object","properties":{"x":{"type":"number","x-mcp-header":"X"}}}));
        assert!(extract("t", &number).is_err());
        let bad_name = schema(json!({"type":"object","properties":{"x":{"type":"string","x-mcp-header":"a b"}}}));
        assert!(extract("t", &bad_name).is_err());
        let dup = schema(json!({"type":"object","properties":{
            "a":{"type":"string","x-mcp-header":"Region"},"b":{"type":"string","x-mcp-header":"region"}}}));
        assert!(extract("t", &dup).is_err());
        let ok = schema(json!({"type":"object","properties":{"a":{"type":"integer","x-mcp-header":"Count"}}}));
        assert_eq!(extract("t", &ok).expect("valid").len(), 1);
    }
}
