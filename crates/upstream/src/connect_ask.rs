//! Asking a caller to connect their account at an `auth = "oauth"` upstream, the way their
//! client can take it: a client that declared URL elicitation gets one URL elicitation (an
//! input round: `input_required` for a 2026-07-28 request or task, `-32042` for a 2025-11-25
//! request, as the gateway renders it) and simply calls again once its user is done; any
//! other client gets a tool error whose text holds the link and says to call again.
//!
//! Invariant: the link is the gateway's sealed connect link, shown only to the caller it is
//! bound to; a user who declined to open it is told so rather than asked again in a loop.

use mcpgate_protocol::elicitation::{ElicitAction, ElicitParams, ElicitUrlParams};
use mcpgate_protocol::input::{InputRequest, InputRequests, InputResponse};
use mcpgate_protocol::tool::CallToolResult;
use mcpgate_runtime::catalog::{Outcome, ToolCall, ToolContext};

use crate::continuation::Continuation;

/// What a call that needs a connection to `upstream` answers: a URL elicitation of `url`
/// (keyed `elicitation_id`) or a tool error holding it.
pub(crate) fn ask_to_connect(
    upstream: &str,
    url: &str,
    elicitation_id: &str,
    cx: &ToolContext,
) -> Outcome<CallToolResult> {
    if !cx.capabilities().elicitation_url() {
        return Outcome::Complete(CallToolResult::error(format!(
            "Your account at {upstream} is not connected (or its connection ended). Open {url} in a browser to \
             connect it, then call this tool again."
        )));
    }
    let message = format!(
        "Connect your account at {upstream}: open the link, sign in and approve access; the call goes on after."
    );
    let request = InputRequest::Elicitation {
        params: ElicitParams::Url(ElicitUrlParams { mode: "url".to_owned(), message, url: url.to_owned() }),
    };
    let continuation = Continuation::Connect { upstream: upstream.to_owned(), key: elicitation_id.to_owned() };
    Outcome::NeedInput {
        requests: InputRequests::from([(elicitation_id.to_owned(), request)]),
        state: Some(continuation.to_state()),
    }
}

/// A call resumed after asking to connect (`key`): the tool error to answer when the user
/// declined or dismissed the link, else `None` (the call goes on; if the account is still not
/// connected, it is asked again with a new link).
pub(crate) fn declined(upstream: &str, key: &str, call: &ToolCall) -> Option<Outcome<CallToolResult>> {
    match call.input_responses.get(key) {
        Some(InputResponse::Elicitation(answer)) if answer.action != ElicitAction::Accept => {
            tracing::debug!(upstream, "the caller declined to connect");
            Some(Outcome::Complete(CallToolResult::error(format!(
                "You did not connect your account at {upstream}, so the call was not made."
            ))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use mcpgate_protocol::capabilities::ClientCapabilities;
    use mcpgate_protocol::elicitation::ElicitResult;
    use mcpgate_runtime::Principal;
    use serde_json::json;

    use super::*;

    fn context(capabilities: serde_json::Value) -> ToolContext {
        let capabilities: ClientCapabilities = serde_json::from_value(capabilities).expect("capabilities");
        ToolContext::detached(Principal::new("https://issuer/", "alice", Vec::new()), capabilities)
    }

    #[test]
    fn a_client_with_url_elicitation_is_asked_to_open_the_link() {
        let outcome =
            ask_to_connect("files", "https://gw/oauth/connect/x", "n1", &context(json!({"elicitation": {"url": {}}})));
        let Outcome::NeedInput { requests, state } = outcome else { panic!("an input round") };
        let asked = serde_json::to_value(&requests["n1"]).expect("json");
        assert_eq!(asked["params"]["mode"], "url");
        assert_eq!(asked["params"]["url"], "https://gw/oauth/connect/x");
        assert_eq!(state, Some(json!({"kind": "connect", "upstream": "files", "key": "n1"})));
    }

    #[test]
    fn any_other_client_gets_the_link_in_a_tool_error() {
        for capabilities in [json!({}), json!({"elicitation": {}})] {
            let outcome = ask_to_connect("files", "https://gw/oauth/connect/x", "n1", &context(capabilities));
            let Outcome::Complete(result) = outcome else { panic!("a tool result") };
            assert_eq!(result.is_error, Some(true));
            let text = serde_json::to_string(&result.content).expect("json");
            assert!(text.contains("https://gw/oauth/connect/x") && text.contains("call this tool again"), "{text}");
        }
    }

    #[test]
    fn a_declined_link_ends_the_call_and_an_accepted_one_goes_on() {
        let answer = |action| {
            let mut call = ToolCall::default();
            let result = ElicitResult { action, content: None, meta: None };
            call.input_responses.insert("n1".to_owned(), InputResponse::Elicitation(result));
            call
        };
        assert!(declined("files", "n1", &answer(ElicitAction::Decline)).is_some());
        assert!(declined("files", "n1", &answer(ElicitAction::Cancel)).is_some());
        assert!(declined("files", "n1", &answer(ElicitAction::Accept)).is_none());
        assert!(declined("files", "n1", &ToolCall::default()).is_none());
    }
}
