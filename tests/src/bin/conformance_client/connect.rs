//! The user of an `auth = "oauth"` upstream: calls its tool (or the connect stand-in), takes the
//! connect link from the gateway's question (URL elicitation, `-32042`, or an `isError` text),
//! opens it in the browser, and calls again, opening at most `MAX_LINKS` links.

use anyhow::{Context as _, bail, ensure};
use serde_json::{Value, json};

use crate::answers::{answers, sample};
use crate::browser::Browser;
use crate::session::Session;
use crate::setup::{CONNECT_TOOL, PREFIX, PUBLIC_URL};

/// Most connect links the user opens in one run: a person gives up, and auth/scope-retry-limit
/// allows at most 3 authorization requests.
const MAX_LINKS: usize = 3;
/// Most calls in one `auth/*` run (each link costs a call and a retry; lists in between).
const MAX_AUTH_ROUNDS: usize = 12;

impl Session {
    /// Plays the user of an `auth = "oauth"` upstream until its own tool answers: calls it (or
    /// the connect stand-in while the list has nothing else), opens each link the gateway asks
    /// to open, retries. Ends with an error when a link is refused or asked for too often.
    pub(super) async fn connect_and_call(&self, browser: &mut Browser) -> anyhow::Result<()> {
        let mut opened = 0;
        let mut retry: Option<Value> = None;
        for _ in 0..MAX_AUTH_ROUNDS {
            let params = match retry.take() {
                Some(params) => params,
                None => {
                    let tools = self.list("tools/list", "tools").await?;
                    let tool = pick_tool(&tools)?;
                    json!({"name": tool["name"], "arguments": sample(&tool["inputSchema"])})
                }
            };
            let name = params["name"].as_str().unwrap_or_default().to_owned();
            let (status, message) = self.message("tools/call", params.clone(), &[]).await?;
            if let Some(ask) = connect_request(&message, &params) {
                ensure!(opened < MAX_LINKS, "asked to connect {name} again after {MAX_LINKS} links: giving up");
                opened += 1;
                #[allow(clippy::print_stderr, reason = "the suite keeps the client's stderr")]
                {
                    eprintln!("{name}: asked to connect; opening link {opened}");
                }
                browser.open(&ask.url).await.with_context(|| format!("opening connect link {opened}"))?;
                retry = Some(ask.retry);
                continue;
            }
            if let Some(error) = message.get("error") {
                bail!("tools/call {name}: HTTP {status}: {error}");
            }
            let result = &message["result"];
            #[allow(clippy::print_stderr, reason = "the suite keeps the client's stderr")]
            {
                eprintln!("{name}: {result}");
            }
            if result["resultType"] == "input_required" {
                let mut next = params;
                next["inputResponses"] = answers(&result["inputRequests"]);
                match result.get("requestState") {
                    Some(state) => next["requestState"] = state.clone(),
                    None => _ = next.as_object_mut().map(|p| p.remove("requestState")),
                }
                retry = Some(next);
                continue;
            }
            ensure!(result["isError"] != json!(true), "{name} failed: {result}");
            if name != CONNECT_TOOL {
                return Ok(());
            }
            // The stand-in says the upstream is connected: its own tools are listed now.
        }
        bail!("the upstream's own tool did not answer within {MAX_AUTH_ROUNDS} calls")
    }
}

/// The tool an `auth/*` run calls: the upstream's own (listed once connected), else the
/// connect stand-in.
fn pick_tool(tools: &[Value]) -> anyhow::Result<&Value> {
    let upstream = |t: &&Value| t["name"].as_str().is_some_and(|n| n.starts_with(PREFIX));
    tools
        .iter()
        .filter(upstream)
        .find(|t| t["name"] != CONNECT_TOOL)
        .or_else(|| tools.iter().find(|t| t["name"] == CONNECT_TOOL))
        .with_context(|| format!("neither the upstream's tools nor {CONNECT_TOOL} listed: {tools:?}"))
}

/// The gateway asking the user to connect: the link, and the call to make once it is opened.
struct ConnectRequest {
    url: String,
    retry: Value,
}

/// Whether `message` (the answer to tools/call with `params`) asks the user to open a connect
/// link, in any of the three ways mcpgate asks: a URL elicitation (2026-07-28 `input_required`;
/// the retry accepts it and carries the `requestState`), error `-32042` with
/// `data.elicitations` (2025-11-25; the retry is the same call), or an `isError` result whose
/// text holds the link (a client without URL elicitation; the retry is the same call).
fn connect_request(message: &Value, params: &Value) -> Option<ConnectRequest> {
    if message["error"]["code"] == json!(-32042) {
        let elicitations = message["error"]["data"]["elicitations"].as_array()?;
        let url = elicitations.iter().find(|e| e["mode"] == "url")?["url"].as_str()?;
        return Some(ConnectRequest { url: url.to_owned(), retry: params.clone() });
    }
    let result = &message["result"];
    if result["resultType"] == "input_required" {
        let requests = result["inputRequests"].as_object()?;
        let (key, url) = requests.iter().find_map(|(key, request)| {
            let asked = &request["params"];
            (request["method"] == "elicitation/create" && asked["mode"] == "url")
                .then(|| Some((key.clone(), asked["url"].as_str()?.to_owned())))
                .flatten()
        })?;
        let mut responses = answers(&result["inputRequests"]);
        responses[key.as_str()] = json!({"action": "accept"});
        let mut retry = params.clone();
        retry["inputResponses"] = responses;
        match result.get("requestState") {
            Some(state) => retry["requestState"] = state.clone(),
            None => _ = retry.as_object_mut().map(|p| p.remove("requestState")),
        }
        return Some(ConnectRequest { url, retry });
    }
    if result["isError"] == json!(true) {
        let texts = result["content"].as_array()?.iter().filter_map(|c| c["text"].as_str());
        let url = texts.into_iter().find_map(link_in)?;
        return Some(ConnectRequest { url, retry: params.clone() });
    }
    None
}

/// The connect link in a text meant for a person (up to whitespace or a closing quote or
/// bracket, without trailing punctuation).
fn link_in(text: &str) -> Option<String> {
    let start = text.find(&format!("{PUBLIC_URL}/oauth/connect/"))?;
    let rest = &text[start..];
    let end =
        rest.find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')' | ']')).unwrap_or(rest.len());
    Some(rest[..end].trim_end_matches(['.', ',', ';', ':']).to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::setup::CONNECT_TOOL;

    const LINK: &str = "https://mcpgate.conformance.test/oauth/connect/AbC-_12";

    fn call() -> Value {
        json!({"name": "up_test-tool", "arguments": {}})
    }

    #[test]
    fn a_legacy_url_elicitation_error_is_a_link_and_the_same_call_again() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32042, "message": "connect",
            "data": {"elicitations": [{"mode": "url", "elicitationId": "n1", "url": LINK, "message": "m"}]}}});
        let ask = connect_request(&message, &call()).expect("a link");
        assert_eq!(ask.url, LINK);
        assert_eq!(ask.retry, call());
    }

    #[test]
    fn a_modern_url_elicitation_is_accepted_on_the_retry_with_its_request_state() {
        let message = json!({"jsonrpc": "2.0", "id": 1, "result": {"resultType": "input_required",
            "inputRequests": {"connect": {"method": "elicitation/create",
                "params": {"mode": "url", "url": LINK, "message": "m"}}},
            "requestState": "sealed"}});
        let ask = connect_request(&message, &call()).expect("a link");
        assert_eq!(ask.url, LINK);
        assert_eq!(ask.retry["inputResponses"], json!({"connect": {"action": "accept"}}));
        assert_eq!(ask.retry["requestState"], "sealed");
        assert_eq!(ask.retry["name"], "up_test-tool");
    }

    #[test]
    fn an_error_result_holding_the_link_is_a_link() {
        let text = format!("Connect your account: open {LINK}. Then call this tool again.");
        let message = json!({"result": {"isError": true, "content": [{"type": "text", "text": text}]}});
        assert_eq!(connect_request(&message, &call()).expect("a link").url, LINK);
    }

    #[test]
    fn answers_and_other_errors_are_no_link() {
        let answered = json!({"result": {"content": [{"type": "text", "text": "test"}]}});
        assert!(connect_request(&answered, &call()).is_none());
        let failed = json!({"result": {"isError": true, "content": [{"type": "text", "text": "no link here"}]}});
        assert!(connect_request(&failed, &call()).is_none());
        let form = json!({"result": {"resultType": "input_required", "inputRequests": {"q": {
            "method": "elicitation/create", "params": {"message": "m", "requestedSchema": {"type": "object"}}}}}});
        assert!(connect_request(&form, &call()).is_none());
    }

    #[test]
    fn the_upstreams_own_tool_is_called_before_the_stand_in() {
        let tools = [json!({"name": CONNECT_TOOL}), json!({"name": "up_test-tool"})];
        assert_eq!(pick_tool(&tools).expect("a tool")["name"], "up_test-tool");
        assert_eq!(pick_tool(&tools[..1]).expect("a tool")["name"], CONNECT_TOOL);
        assert!(pick_tool(&[json!({"name": "other"})]).is_err());
    }
}
