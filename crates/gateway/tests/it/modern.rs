//! The 2026-07-28 surface: discover, lists with cache hints, calls, and every era rule with
//! its status and code.

use serde_json::{Value, json};

use crate::support::{MODERN, Req, app, assert_error, config, meta};

#[tokio::test]
async fn discover_describes_both_eras_and_caching() {
    let app = app(config()).await;
    let result = Req::modern("server/discover", json!({})).send(&app).await.result();
    assert_eq!(result["resultType"], "complete");
    let versions: Vec<&str> =
        result["supportedVersions"].as_array().expect("list").iter().filter_map(Value::as_str).collect();
    assert_eq!(versions, ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]);
    for cap in ["tools", "prompts", "resources", "completions"] {
        assert!(result["capabilities"][cap].is_object(), "{cap}: {result}");
    }
    assert!(result["capabilities"].get("tasks").is_none(), "no legacy tasks capability on the modern surface");
    assert!(result["ttlMs"].as_u64().is_some() && result["cacheScope"] == "public");
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcpgate");
}

#[tokio::test]
async fn lists_carry_result_type_and_cache_hints() {
    let app = app(config()).await;
    for (method, key) in [
        ("tools/list", "tools"),
        ("prompts/list", "prompts"),
        ("resources/list", "resources"),
        ("resources/templates/list", "resourceTemplates"),
    ] {
        let result = Req::modern(method, json!({})).send(&app).await.result();
        assert!(result[key].as_array().is_some_and(|a| !a.is_empty()), "{method}: {result}");
        assert_eq!(result["resultType"], "complete", "{method}");
        assert_eq!(result["ttlMs"], 60_000, "{method}");
        assert_eq!(result["cacheScope"], "public", "{method}");
    }
    let tools = Req::modern("tools/list", json!({})).send(&app).await.result();
    assert_eq!(tools["tools"][0]["name"], "test_simple_text", "conformance fixtures first, as configured");
    assert!(
        tools["tools"].as_array().expect("tools").iter().all(|t| t.get("execution").is_none()),
        "no legacy execution member"
    );
    let resp = Req::modern("tools/list", json!({"cursor": "abc"})).send(&app).await;
    assert_error(&resp, 200, -32602);
}

#[tokio::test]
async fn tools_call_and_tool_errors() {
    let app = app(config()).await;
    let result =
        Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "héllo"}})).send(&app).await.result();
    assert_eq!(result["content"][0]["text"], "héllo");
    assert_eq!(result["resultType"], "complete");

    let result =
        Req::modern("tools/call", json!({"name": "sum", "arguments": {"numbers": [1, 2.5]}})).send(&app).await.result();
    assert_eq!(result["structuredContent"]["sum"], 3.5);

    let result = Req::modern("tools/call", json!({"name": "fail", "arguments": {}})).send(&app).await.result();
    assert_eq!(result["isError"], true, "a failing tool is a result, not a protocol error");

    let resp = Req::modern("tools/call", json!({"name": "nope", "arguments": {}})).send(&app).await;
    let json = assert_error(&resp, 200, -32602);
    assert_eq!(json["id"], 1);
    // Arguments the tool refuses are its result (SEP-1303), not a protocol error.
    let result = Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": 5}})).send(&app).await.result();
    assert_eq!(result["isError"], true, "{result}");
    let resp = Req::modern("tools/call", json!({"arguments": {}})).header("mcp-name", "x").send(&app).await;
    assert_error(&resp, 200, -32602);
}

#[tokio::test]
async fn missing_meta_is_400_invalid_params() {
    let app = app(config()).await;
    for params in [
        json!({}),
        json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": MODERN}}),
    ] {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": params});
        let resp = Req::post(body.to_string())
            .header("mcp-protocol-version", MODERN)
            .header("mcp-method", "server/discover")
            .send(&app)
            .await;
        let json = assert_error(&resp, 400, -32602);
        assert_eq!(json["id"], 3, "errors echo the id");
    }
    // clientInfo is optional.
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = Req::post(body.to_string())
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "server/discover")
        .send(&app)
        .await;
    assert!(resp.result()["capabilities"].is_object());
}

#[tokio::test]
async fn header_rules_are_400_header_mismatch() {
    let app = app(config()).await;
    let cases = [
        Req::modern("tools/list", json!({})).without("mcp-protocol-version"),
        Req::modern("tools/list", json!({})).header("mcp-protocol-version", "2025-11-25"),
        Req::modern("tools/list", json!({})).without("mcp-method"),
        Req::modern("tools/list", json!({})).header("mcp-method", "prompts/list"),
        Req::modern("tools/list", json!({})).header("mcp-method", "TOOLS/LIST"),
        Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "a"}})).without("mcp-name"),
        Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "a"}})).header("mcp-name", "other"),
        Req::modern("resources/read", json!({"uri": "test://static-text"})).header("mcp-name", "test://other"),
        Req::modern("prompts/get", json!({"name": "test_simple_prompt"})).header("mcp-name", "=?base64?not base64?="),
    ];
    for req in cases {
        assert_error(&req.send(&app).await, 400, -32020);
    }
}

#[tokio::test]
async fn header_values_are_trimmed_and_base64_decoded() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "test_simple_text"}))
        .header("mcp-name", "  test_simple_text\t")
        .send(&app)
        .await;
    assert_eq!(resp.result()["content"][0]["text"], "This is a simple text response for testing.");
    // "héllo" is not plain ASCII, so a client sends it base64-wrapped.
    let resp = Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "x"}}))
        .header("mcp-name", "=?base64?ZWNobw==?=")
        .send(&app)
        .await;
    assert_eq!(resp.result()["content"][0]["text"], "x");
    let resp = Req::modern("tools/list", json!({})).header("MCP-METHOD", "tools/list").send(&app).await;
    assert!(resp.result()["tools"].is_array(), "header names are case-insensitive");
}

#[tokio::test]
async fn mirrored_tool_params_must_match() {
    let app = app(config()).await;
    let call = |region: &str| {
        Req::modern("tools/call", json!({"name": "test_custom_header", "arguments": {"region": region}}))
    };
    let ok = call("eu-west").header("mcp-param-region", "eu-west").send(&app).await.result();
    assert_eq!(ok["content"][0]["text"], "Region: eu-west");
    assert!(call("Hello").header("mcp-param-region", "=?base64?SGVsbG8=?=").send(&app).await.result().is_object());
    assert!(call("SGVsbG8=").header("mcp-param-region", "SGVsbG8=").send(&app).await.result().is_object());
    assert_error(&call("eu-west").send(&app).await, 400, -32020);
    assert_error(&call("eu-west").header("mcp-param-region", "us-east").send(&app).await, 400, -32020);
    assert_error(&call("Hello").header("mcp-param-region", "=?base64?SGVsbG8?=").send(&app).await, 400, -32020);
    let no_arg = Req::modern("tools/call", json!({"name": "test_custom_header", "arguments": {}}))
        .header("mcp-param-region", "x");
    assert_error(&no_arg.send(&app).await, 400, -32020);
}

#[tokio::test]
async fn unsupported_version_is_400_with_supported_list() {
    let app = app(config()).await;
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "v999.0.0", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = Req::post(body.to_string())
        .header("mcp-protocol-version", "v999.0.0")
        .header("mcp-method", "server/discover")
        .send(&app)
        .await;
    let json = assert_error(&resp, 400, -32022);
    assert_eq!(json["id"], 9);
    assert_eq!(json["error"]["data"]["requested"], "v999.0.0");
    assert_eq!(json["error"]["data"]["supported"][0], MODERN);
    // A legacy version cannot be spoken per request.
    let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2025-11-25", "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = Req::post(body.to_string())
        .header("mcp-protocol-version", "2025-11-25")
        .header("mcp-method", "tools/list")
        .send(&app)
        .await;
    assert_error(&resp, 400, -32022);
    // An unknown version header with no _meta at all.
    let resp = Req::post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string())
        .header("mcp-protocol-version", "1999-01-01")
        .send(&app)
        .await;
    assert_error(&resp, 400, -32022);
}

#[tokio::test]
async fn unknown_and_legacy_only_methods_are_404() {
    let app = app(config()).await;
    for method in [
        "unknown/method",
        "initialize",
        "ping",
        "logging/setLevel",
        "resources/subscribe",
        "tasks/result",
        "tasks/list",
    ] {
        let json = assert_error(&Req::modern(method, json!({})).send(&app).await, 404, -32601);
        assert_eq!(json["id"], 1, "{method}");
    }
}

#[tokio::test]
async fn undeclared_capability_is_400_with_required_capabilities() {
    let app = app(config()).await;
    let resp = Req::modern("tools/call", json!({"name": "test_missing_capability", "arguments": {}})).send(&app).await;
    let json = assert_error(&resp, 400, -32021);
    assert!(json["error"]["data"]["requiredCapabilities"]["sampling"].is_object(), "{json}");
    // An input request the client cannot answer is refused the same way.
    let resp =
        Req::modern("tools/call", json!({"name": "test_streaming_elicitation", "arguments": {}})).send(&app).await;
    let json = assert_error(&resp, 400, -32021);
    assert!(json["error"]["data"]["requiredCapabilities"]["elicitation"].is_object(), "{json}");
}

#[tokio::test]
async fn input_requests_respect_declared_capabilities() {
    let app = app(config()).await;
    let resp = Req::modern_with(
        "tools/call",
        json!({"name": "test_streaming_elicitation", "arguments": {}}),
        json!({"elicitation": {}}),
    )
    .send(&app)
    .await;
    let result = resp.result();
    assert_eq!(result["resultType"], "input_required");
    let (key, request) = result["inputRequests"].as_object().and_then(|m| m.iter().next()).expect("one request");
    assert_eq!(request["method"], "elicitation/create", "{key}");
    let resp = Req::modern_with(
        "tools/call",
        json!({"name": "test_missing_capability", "arguments": {}}),
        json!({"sampling": {}}),
    )
    .send(&app)
    .await;
    assert_eq!(resp.result()["inputRequests"]["sample"]["method"], "sampling/createMessage");
}

#[tokio::test]
async fn foreign_request_state_is_invalid_params() {
    let app = app(config()).await;
    let resp =
        Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "a"}, "requestState": "v1.k1.AAAA"}))
            .send(&app)
            .await;
    let json = assert_error(&resp, 200, -32602);
    assert!(json["error"]["message"].as_str().expect("msg").contains("requestState"), "{json}");
}

#[tokio::test]
async fn legacy_task_param_is_ignored_on_the_modern_surface() {
    let app = app(config()).await;
    let resp = Req::modern(
        "tools/call",
        json!({"name": "greet", "arguments": {"name": "legacy-hint"}, "task": {"ttl": 60000, "pollInterval": 100}}),
    )
    .send(&app)
    .await;
    let result = resp.result();
    assert_eq!(result["content"][0]["text"], "Hello, legacy-hint!");
    assert!(result.get("taskId").is_none());
}

#[tokio::test]
async fn prompts_resources_and_completion() {
    let app = app(config()).await;
    let result = Req::modern(
        "prompts/get",
        json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a", "arg2": "b"}}),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(result["messages"][0]["content"]["text"], "Prompt with arguments: arg1='a', arg2='b'");
    assert_eq!(result["resultType"], "complete");
    let resp = Req::modern("prompts/get", json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "a"}}))
        .send(&app)
        .await;
    assert_error(&resp, 200, -32602);
    assert_error(&Req::modern("prompts/get", json!({"name": "nope"})).send(&app).await, 200, -32602);

    let result = Req::modern("resources/read", json!({"uri": "test://template/42/data"})).send(&app).await.result();
    let text = result["contents"][0]["text"].as_str().expect("text");
    assert_eq!(serde_json::from_str::<Value>(text).expect("json")["id"], "42");
    assert!(result["ttlMs"].is_u64() && result["cacheScope"].is_string());

    let resp = Req::modern("resources/read", json!({"uri": "test://missing"})).send(&app).await;
    let json = assert_error(&resp, 200, -32602);
    assert_eq!(json["error"]["data"]["uri"], "test://missing");

    let result = Req::modern(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "summarize"}, "argument": {"name": "style", "value": "b"}}),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(result["completion"]["values"], json!(["brief", "bullet-points"]));
    assert_eq!(result["completion"]["total"], 2);
    let result = Req::modern(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "mcpgate://demo/greeting/{name}"}, "argument": {"name": "name", "value": "A"}}),
    )
    .send(&app)
    .await
    .result();
    assert_eq!(result["completion"]["values"], json!(["Ada", "Alan"]));
    let resp = Req::modern(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "zzz"}, "argument": {"name": "a", "value": ""}}),
    )
    .send(&app)
    .await;
    assert_error(&resp, 200, -32602);
}

#[tokio::test]
async fn session_id_is_ignored_on_the_modern_surface() {
    let app = app(config()).await;
    let resp = Req::modern("tools/list", json!({})).header("mcp-session-id", "garbage").send(&app).await;
    assert!(resp.result()["tools"].is_array());
    assert!(resp.header("mcp-session-id").is_none(), "never minted or echoed");
}

#[tokio::test]
async fn meta_capabilities_are_per_request() {
    let app = app(config()).await;
    let with = Req::modern_with("tools/call", json!({"name": "test_missing_capability"}), json!({"sampling": {}}))
        .send(&app)
        .await;
    assert_eq!(with.result()["resultType"], "input_required");
    // The next request, without the capability, is not helped by the previous one.
    let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "test_missing_capability", "_meta": meta(json!({}))}});
    let resp = Req::post(body.to_string())
        .header("mcp-protocol-version", MODERN)
        .header("mcp-method", "tools/call")
        .header("mcp-name", "test_missing_capability")
        .send(&app)
        .await;
    assert_error(&resp, 400, -32021);
}

#[tokio::test]
async fn malformed_optional_meta_is_reported_as_such() {
    let app = app(config()).await;
    let resp = Req::modern("tools/list", json!({"_meta": {"progressToken": 1.5}})).send(&app).await;
    let json = assert_error(&resp, 400, -32602);
    let message = json["error"]["message"].as_str().expect("message");
    assert!(message.contains("invalid _meta") && !message.contains("missing"), "{message}");
    let resp =
        Req::modern("tools/list", json!({"_meta": {"io.modelcontextprotocol/logLevel": "verbose"}})).send(&app).await;
    assert_error(&resp, 400, -32602);
}

#[tokio::test]
async fn modern_clients_cannot_post_responses() {
    let app = app(config()).await;
    let resp =
        Req::post(r#"{"jsonrpc":"2.0","id":"x","result":{}}"#).header("mcp-protocol-version", MODERN).send(&app).await;
    let json = assert_error(&resp, 400, -32600);
    assert_eq!(json["id"], "x");
}

#[tokio::test]
async fn client_input_is_clipped_in_messages() {
    let app = app(config()).await;
    let uri = format!("test://{}", "x".repeat(5000));
    let resp = Req::modern("resources/read", json!({"uri": uri})).send(&app).await;
    let json = assert_error(&resp, 200, -32602);
    assert!(json["error"]["message"].as_str().expect("message").len() < 200);
    assert_eq!(json["error"]["data"]["uri"], uri, "data carries the URI the client asked for");
}

/// Arguments that do not fit a tool's schema are the tool's result with `isError: true` and
/// the reason as text (SEP-1303, in 2025-11-25 and 2026-07-28), so the model reads it and
/// corrects the call; an unknown tool stays a protocol error (-32602).
#[tokio::test]
async fn bad_tool_arguments_are_a_result_the_model_reads_in_both_eras() {
    let app = app(config()).await;
    let (session, _) = crate::support::initialize(&app, "2025-11-25").await;
    let modern =
        |name: &str, arguments: Value| Req::modern("tools/call", json!({"name": name, "arguments": arguments}));
    let legacy = |name: &str, arguments: Value| {
        Req::legacy("tools/call", json!({"name": name, "arguments": arguments}), Some(&session))
    };
    for (era, req) in [
        ("2026-07-28", modern("sum", json!({"numbrs": [1, 2]}))),
        ("2025-11-25", legacy("sum", json!({"numbrs": [1, 2]}))),
    ] {
        let result = req.send(&app).await.result();
        assert_eq!(result["isError"], true, "{era}: {result}");
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("invalid arguments") && text.contains("numbers"),
            "{era}: the reason, for the model: {result}"
        );
    }
    // The positive control, and an unknown tool, which stays a protocol error in both eras.
    assert_eq!(modern("sum", json!({"numbers": [1, 2]})).send(&app).await.result()["structuredContent"]["sum"], 3.0);
    assert_error(&modern("no_such_tool", json!({})).send(&app).await, 200, -32602);
    assert_error(&legacy("no_such_tool", json!({})).send(&app).await, 200, -32602);
}
