//! An upstream's requests for user input (2026-07-28 multi-round calls) relayed to the
//! client: the upstream's `inputRequests` become the gateway's own round (the gateway seals
//! the continuation into its user-bound `requestState`), and the client's answers, with the
//! upstream's `requestState`, go back upstream on the retry. Inside a gateway task the same
//! round parks the task until the client answers.
//!
//! Threat model: the upstream's `requestState` is opaque to the gateway and never reaches the
//! client in the clear: it travels only inside the gateway's sealed, user- and call-bound
//! state (or the task record), so a client can neither read nor forge it; a continuation names
//! its upstream, and one that names another is refused. Only the capabilities the client
//! itself declared for answering input (elicitation, sampling, roots) are declared upstream,
//! so an upstream never asks what the client cannot answer.

use serde::Deserialize as _;
use serde_json::{Map, Value};

use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::input::InputRequests;
use mcpgate_protocol::relayed::RawMembers;
use mcpgate_runtime::catalog::{Failure, Outcome, ToolCall};

use crate::continuation::{Continuation, exposed_key};

/// The client capabilities declared upstream: those for answering input, as the client
/// declared them; `None` when it declared none.
pub(crate) fn declared_upstream(client: &ClientCapabilities) -> Option<Value> {
    let relayable = ClientCapabilities {
        elicitation: client.elicitation.clone(),
        sampling: client.sampling.clone(),
        roots: client.roots.clone(),
        ..ClientCapabilities::default()
    };
    if relayable == ClientCapabilities::default() {
        return None;
    }
    serde_json::to_value(relayable).ok()
}

/// An answer to an upstream's `method` request (`params` as it asked) as sent upstream: an
/// accepted form elicitation gets, for each field the client left out, the default its schema
/// names (SEP-1034: the client applies defaults, and mcpgate is the upstream's client). Any
/// other answer is sent as it is.
pub(crate) fn with_defaults(method: &str, params: Option<&Value>, mut answer: Value) -> Value {
    let properties = params.and_then(|p| p["requestedSchema"]["properties"].as_object());
    let (Some(properties), true) = (properties, method == "elicitation/create" && answer["action"] == "accept") else {
        return answer;
    };
    if !answer["content"].is_object() {
        answer["content"] = Value::Object(Map::new());
    }
    if let Some(content) = answer["content"].as_object_mut() {
        for (field, schema) in properties {
            if let Some(default) = schema.get("default").filter(|_| !content.contains_key(field)) {
                content.insert(field.clone(), default.clone());
            }
        }
    }
    answer
}

/// The answers to the upstream's `keys` of input round `round` among a call's answers, as JSON
/// to send upstream under the upstream's own keys.
pub(crate) fn answers(call: &ToolCall, keys: &[String], round: u32) -> Result<Map<String, Value>, Failure> {
    let mut answers = Map::new();
    for key in keys {
        if let Some(answer) = call.input_responses.get(&exposed_key(key, round)) {
            let answer = serde_json::to_value(answer)
                // Text: a runtime `Failure` carries its message only.
                .map_err(|e| Failure::Internal(format!("an answer could not be relayed: {e}")))?;
            answers.insert(key.clone(), answer);
        }
    }
    Ok(answers)
}

/// Adds the answers to input round `round` and the upstream's state to a retry's params.
pub(crate) fn continue_round(
    params: &mut Map<String, Value>,
    call: &ToolCall,
    keys: &[String],
    state: Option<&str>,
    round: u32,
) -> Result<(), Failure> {
    params.insert("inputResponses".to_owned(), Value::Object(answers(call, keys, round)?));
    if let Some(state) = state {
        params.insert("requestState".to_owned(), Value::String(state.to_owned()));
    }
    Ok(())
}

/// The state of an `input_required` result that asks nothing (the upstream handing the call
/// on, e.g. shedding load): the caller retries at once with it, as SEP-2322 says a client
/// may. `None` for any other result.
pub(crate) fn handed_on(raw: &serde_json::value::RawValue) -> Option<String> {
    if !raw.get().contains("input_required") {
        return None;
    }
    let r = RawMembers::split(raw.get()).ok()?;
    if r.result_type.as_deref() != Some("input_required") {
        return None;
    }
    let asks = match r.members.get("inputRequests") {
        None => false,
        Some(requests) => serde_json::from_str::<Map<String, Value>>(requests.get()).map_or(true, |m| !m.is_empty()),
    };
    if asks {
        return None;
    }
    String::deserialize(r.members.get("requestState")?).ok()
}

/// Input round `round` that an `input_required` result asks for, or why it cannot be relayed.
pub(crate) fn ask<T>(upstream: &str, members: &RawMembers, round: u32) -> Result<Outcome<T>, String> {
    let requests = members.get("inputRequests").ok_or("an input_required result without inputRequests")?;
    let requests: InputRequests =
        // Text: the reason goes into the tool result the client sees, as a whole.
        serde_json::from_str(requests.get()).map_err(|e| format!("input requests mcpgate cannot relay ({e})"))?;
    if requests.is_empty() {
        return Err("an input_required result that asks nothing".to_owned());
    }
    let state = match members.get("requestState") {
        None => None,
        Some(raw) => Some(String::deserialize(raw).map_err(|_| "a requestState that is not a string")?),
    };
    let keys = requests.keys().cloned().collect();
    let requests = requests.into_iter().map(|(key, request)| (exposed_key(&key, round), request)).collect();
    let continuation = Continuation::Round { upstream: upstream.to_owned(), keys, state, round };
    Ok(Outcome::NeedInput { requests, state: Some(continuation.to_state()) })
}

#[cfg(test)]
mod tests {
    use mcpgate_protocol::input::InputResponses;
    use serde_json::json;

    use super::*;

    #[test]
    fn an_accepted_form_gets_its_schema_defaults() {
        let params = json!({"message": "m", "requestedSchema": {"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
            "nick": {"type": "string"}}}});
        let filled =
            with_defaults("elicitation/create", Some(&params), json!({"action": "accept", "content": {"age": 7}}));
        assert_eq!(filled, json!({"action": "accept", "content": {"name": "John Doe", "age": 7}}));
        let bare = with_defaults("elicitation/create", Some(&params), json!({"action": "accept"}));
        assert_eq!(bare["content"], json!({"name": "John Doe", "age": 30}));
        let declined = json!({"action": "decline"});
        assert_eq!(with_defaults("elicitation/create", Some(&params), declined.clone()), declined);
        let sampled = json!({"role": "assistant"});
        assert_eq!(with_defaults("sampling/createMessage", Some(&params), sampled.clone()), sampled);
    }

    #[test]
    fn only_a_result_that_asks_nothing_hands_the_call_on() {
        let raw = |json: &str| serde_json::value::RawValue::from_string(json.to_owned()).expect("json");
        let on = r#"{"resultType":"input_required","requestState":"s-1"}"#;
        assert_eq!(handed_on(&raw(on)).as_deref(), Some("s-1"));
        let empty = r#"{"resultType":"input_required","inputRequests":{},"requestState":"s-2"}"#;
        assert_eq!(handed_on(&raw(empty)).as_deref(), Some("s-2"));
        let asks =
            r#"{"resultType":"input_required","requestState":"s","inputRequests":{"k":{"method":"roots/list"}}}"#;
        assert_eq!(handed_on(&raw(asks)), None);
        assert_eq!(handed_on(&raw(r#"{"resultType":"input_required"}"#)), None, "nothing to retry with");
        assert_eq!(handed_on(&raw(r#"{"content":[],"requestState":"input_required"}"#)), None);
    }

    fn asked(json: &str) -> Outcome<()> {
        ask("up", &RawMembers::split(json).expect("object").members, 1).expect("relayable")
    }

    #[test]
    fn a_round_goes_to_the_client_and_its_answers_back_upstream() {
        let Outcome::NeedInput { requests, state } = asked(
            r#"{"resultType":"input_required","requestState":"opaque-1","inputRequests":
               {"confirm":{"method":"elicitation/create","params":{"message":"Sure?","requestedSchema":
               {"type":"object","properties":{"ok":{"type":"boolean"}}}}}}}"#,
        ) else {
            panic!("a round")
        };
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["confirm"]);
        let answers: InputResponses = serde_json::from_value(json!({
            "confirm": {"action": "accept", "content": {"ok": true}},
            "earlier": {"action": "decline"},
        }))
        .expect("answers");
        let call = ToolCall { arguments: json!({}), input_responses: answers, state };
        let Some(Continuation::Round { keys, state, round, .. }) = Continuation::of(&call, "up").expect("ours") else {
            panic!("a round's continuation")
        };
        let mut params = Map::new();
        continue_round(&mut params, &call, &keys, state.as_deref(), round).expect("continues");
        assert_eq!(params["requestState"], "opaque-1");
        assert_eq!(params["inputResponses"], json!({"confirm": {"action": "accept", "content": {"ok": true}}}));
        assert!(Continuation::of(&call, "another").is_err(), "bound to its upstream");
    }

    #[test]
    fn rounds_that_cannot_be_relayed_say_why() {
        let members = |json: &str| RawMembers::split(json).expect("object").members;
        assert!(ask::<()>("up", &members(r#"{"resultType":"input_required"}"#), 1).is_err());
        assert!(ask::<()>("up", &members(r#"{"inputRequests":{}}"#), 1).is_err());
        assert!(ask::<()>("up", &members(r#"{"inputRequests":{"k":{"method":"unknown/x"}}}"#), 1).is_err());
        let bad_state = r#"{"inputRequests":{"k":{"method":"roots/list"}},"requestState":1}"#;
        assert!(ask::<()>("up", &members(bad_state), 1).is_err());
        // A later round's keys are made unique; its answers go back under the upstream's keys.
        let Ok(Outcome::<()>::NeedInput { requests, state }) =
            ask("up", &members(r#"{"inputRequests":{"k":{"method":"roots/list"}}}"#), 2)
        else {
            panic!("a round")
        };
        assert_eq!(requests.keys().collect::<Vec<_>>(), ["k.r2"]);
        let answers: mcpgate_protocol::input::InputResponses =
            serde_json::from_value(json!({"k.r2": {"roots": []}, "k": {"roots": [{"uri": "file:///old"}]}}))
                .expect("answers");
        let call = ToolCall { arguments: json!({}), input_responses: answers, state };
        let Some(Continuation::Round { keys, round, .. }) = Continuation::of(&call, "up").expect("ours") else {
            panic!("a round's continuation")
        };
        assert_eq!(Value::Object(answers_for(&call, &keys, round)), json!({"k": {"roots": []}}));
    }

    fn answers_for(call: &ToolCall, keys: &[String], round: u32) -> Map<String, Value> {
        answers(call, keys, round).expect("answers")
    }

    #[test]
    fn only_input_capabilities_are_declared_upstream() {
        let client: ClientCapabilities =
            serde_json::from_value(json!({"elicitation": {}, "extensions": {"io.modelcontextprotocol/tasks": {}}}))
                .expect("caps");
        assert_eq!(declared_upstream(&client), Some(json!({"elicitation": {}})));
        assert_eq!(declared_upstream(&ClientCapabilities::default()), None);
    }
}
