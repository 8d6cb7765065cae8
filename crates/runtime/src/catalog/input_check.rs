//! Which client capabilities a set of input requests needs that the client did not declare:
//! a server may only ask for what the request's capabilities allow (elicitation and its
//! modes, sampling and sampling with tools, roots).

use serde_json::{Map, Value};

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::elicitation::ElicitParams;
use mcpgate_protocol::input::{InputRequest, InputRequests};

use super::outcome::Failure;

/// `None` when every request is answerable; otherwise the failure naming what is missing.
pub fn missing_capabilities(caps: &ClientCapabilities, requests: &InputRequests) -> Option<Failure> {
    let mut required = Map::new();
    let mut add = |key: &str, sub: Option<&str>| {
        let entry = required.entry(key.to_owned()).or_insert_with(|| Value::Object(Map::new()));
        if let (Some(sub), Value::Object(map)) = (sub, entry) {
            map.insert(sub.to_owned(), Value::Object(Map::new()));
        }
    };
    for request in requests.values() {
        match request {
            InputRequest::Elicitation { params: ElicitParams::Form(_) } if !caps.elicitation_form() => {
                add("elicitation", caps.elicitation.is_some().then_some("form"));
            }
            InputRequest::Elicitation { params: ElicitParams::Url(_) } if !caps.elicitation_url() => {
                add("elicitation", Some("url"));
            }
            InputRequest::Sampling { params } => {
                if caps.sampling.is_none() {
                    add("sampling", None);
                }
                let wants_tools = params.tools.as_ref().is_some_and(|t| !t.is_empty());
                if wants_tools && caps.sampling.as_ref().is_none_or(|s| s.tools.is_none()) {
                    add("sampling", Some("tools"));
                }
            }
            InputRequest::ListRoots { .. } if caps.roots.is_none() => add("roots", None),
            _ => {}
        }
    }
    if required.is_empty() {
        return None;
    }
    let names: Vec<&str> = required.keys().map(String::as_str).collect();
    let message = format!("This request needs client capabilities it did not declare: {}", names.join(", "));
    let required: ClientCapabilities = serde_json::from_value(Value::Object(required)).unwrap_or_default();
    Some(Failure::MissingCapability { required: Box::new(required), message })
}
