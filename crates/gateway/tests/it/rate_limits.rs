//! A caller over a rate limit, as the README documents the refusal: 429 with `Retry-After`
//! (whole seconds, rounded up) and -32600 whose message names the limit, with `data.limit`
//! and `data.retryAfterMs`, in either era.

use serde_json::json;

use crate::support::{Req, Resp, app, assert_error, config, initialize};

/// Asserts the documented refusal of a call over "tool calls per caller (1 a minute, 1 at
/// once)".
#[track_caller]
fn assert_rate_limited(refused: &Resp) {
    let json = assert_error(refused, 429, -32600);
    let data = &json["error"]["data"];
    assert_eq!(data["limit"], "tool calls per caller (1 a minute, 1 at once)", "{json}");
    let wait_ms = data["retryAfterMs"].as_u64().unwrap_or_else(|| panic!("data.retryAfterMs in {json}"));
    // One call a minute, just spent: the next is admitted in about a minute.
    assert!((55_000..=60_000).contains(&wait_ms), "{json}");
    let retry_after: u64 = refused.header("retry-after").and_then(|s| s.parse().ok()).expect("Retry-After in seconds");
    assert_eq!(retry_after, wait_ms.div_ceil(1000), "Retry-After is data.retryAfterMs rounded up: {json}");
    let message = json["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("tool calls per caller (1 a minute, 1 at once)"),
        "the message names the limit: {message}"
    );
}

#[tokio::test]
async fn a_call_over_the_rate_limit_says_which_limit_and_when_to_retry() {
    let mut c = config();
    c.limits.calls_per_minute = 1;
    c.limits.calls_burst = 1;
    let app = app(c).await;
    let call = || Req::modern("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}));
    assert_eq!(call().send(&app).await.result()["content"][0]["text"], "hi");
    assert_rate_limited(&call().send(&app).await);
    // The same budget in the other era (auth none: every caller is one principal).
    let (session, _) = initialize(&app, "2025-11-25").await;
    let legacy = Req::legacy("tools/call", json!({"name": "echo", "arguments": {"text": "hi"}}), Some(&session));
    assert_rate_limited(&legacy.send(&app).await);
}
