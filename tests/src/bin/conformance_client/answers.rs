//! What the client makes up: a tool's arguments (the scenario's, else made from the tool's
//! schema), its `Mcp-Param-*` headers, and answers to the input requests a call or task asks.

use serde_json::{Map, Value, json};

use mcpgate_protocol::mirrored;

use crate::setup::PREFIX;

/// A tool's arguments: the scenario's, else special cases, else made from its schema.
pub(super) fn arguments_for(remote: &str, tool: &Value, tools: &[Value], context: &Value) -> Value {
    let given = context["toolCalls"].as_array().into_iter().flatten().find(|c| c["name"] == remote);
    if let Some(call) = given {
        return call["arguments"].clone();
    }
    // json-schema-2020-12-preservation: echo back the schema mcpgate listed for the focal tool.
    if remote == "json_schema_echo" {
        let focal = tools.iter().find(|t| t["name"] == format!("{PREFIX}json_schema_2020_12_tool"));
        return json!({"schema": focal.map_or(json!({}), |t| t["inputSchema"].clone())});
    }
    sample(&tool["inputSchema"])
}

/// A value for a schema: its required properties, each of its type.
pub(super) fn sample(schema: &Value) -> Value {
    if let Some(default) = schema.get("default") {
        return default.clone();
    }
    if let Some(first) = schema["enum"].as_array().and_then(|e| e.first()) {
        return first.clone();
    }
    match schema["type"].as_str() {
        Some("object") | None => {
            let mut out = Map::new();
            for key in schema["required"].as_array().into_iter().flatten().filter_map(Value::as_str) {
                out.insert(key.to_owned(), sample(&schema["properties"][key]));
            }
            Value::Object(out)
        }
        Some("string") => json!("test"),
        Some("integer") => json!(1),
        Some("number") => json!(1.5),
        Some("boolean") => json!(true),
        Some("array") => json!([]),
        Some(_) => Value::Null,
    }
}

/// `Mcp-Param-*` headers for the arguments of a tool whose schema annotates properties with
/// `x-mcp-header` (SEP-2243: strings, integers and booleans; absent or null: no header).
pub(super) fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    let Some(properties) = schema["properties"].as_object() else { return Vec::new() };
    properties
        .iter()
        .filter_map(|(key, property)| {
            let header = property["x-mcp-header"].as_str()?;
            let text = mirrored::param_text(arguments.get(key)?)?;
            Some((mirrored::param_header(header), mirrored::encode(&text).into_owned()))
        })
        .collect()
}

/// Answers to input requests: elicitations accepted with the schema's values, a canned
/// sample, no roots.
pub(super) fn answers(requests: &Value) -> Value {
    let mut out = Map::new();
    for (key, request) in requests.as_object().into_iter().flatten() {
        let answer = match request["method"].as_str() {
            Some("elicitation/create") => {
                json!({"action": "accept", "content": sample(&request["params"]["requestedSchema"])})
            }
            Some("sampling/createMessage") => json!({
                "role": "assistant",
                "content": {"type": "text", "text": "sampled by mcpgate-conformance-client"},
                "model": "mcpgate-conformance-client",
                "stopReason": "endTurn",
            }),
            Some("roots/list") => json!({"roots": []}),
            _ => continue,
        };
        out.insert(key.clone(), answer);
    }
    Value::Object(out)
}
