//! Connecting from a tool call in each era, across replicas: each user's calls carry only
//! their own token; a link opened by another user, or replayed, is refused; Redis holds no
//! token in clear; a connection revoked by an operator or disconnected by its user asks again.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::setup::Setup;
use super::{UPSTREAM, URL_ELICITATION, get, principal_key, text, tool_names, url_elicitation};
use crate::at_rest::dump;
use crate::oauth_connect::holds_a_jwt;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_connects_from_a_tool_call_in_their_era_and_each_call_carries_only_their_token() -> anyhow::Result<()>
{
    let setup = Setup::start(Duration::from_secs(300)).await?;
    let (mut alice, mut bob, mut carol) =
        (setup.user("alice").await?, setup.user("bob").await?, setup.user("carol").await?);
    let lb = setup.cluster.url();
    let url_elicitation_caps: Value = serde_json::from_str(URL_ELICITATION)?;

    // The premise of "never the caller's own bearer": the upstream refuses it (another
    // audience), so every answer below came with a token the gateway held for that user.
    let auth = [("authorization", alice.bearer.as_str())];
    let direct = setup.client.modern_with(setup.servers.endpoint(), &auth, "tools/list", json!({})).await?;
    assert_eq!(direct.status, 401, "the upstream takes only its own tokens: {}", direct.body);

    // Not connected: the stand-in only.
    assert_eq!(tool_names(&setup, &alice).await?, ["files_connect"]);

    // A 2026-07-28 client declaring URL elicitation is asked by one.
    let call = json!({"name": "files_whoami", "arguments": {}});
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), call.clone()).await?;
    let (_, alices_first, _) = url_elicitation(&asked)?;
    // Any other client: the link in a tool error.
    let bobs_link = setup.link_in_tool_error(&bob).await?;

    // Bob opens Alice's link (signing in as himself): refused, nothing stored, link spent.
    let (status, page, _) = setup.connect(&mut bob, &alices_first, (0, 1, 2)).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}\n{}", setup.logs());
    assert_eq!(setup.connections()?, Vec::<Value>::new(), "nothing stored");
    assert_eq!(get(&setup.on(2, &alices_first)?).await?.0, StatusCode::GONE, "the link was spent");

    // Alice's client retries its call through the requestState: still not connected, so a new
    // link; she opens it on replica 0, the sign-in returns to 1, the authorization to 2.
    let retry = |key: &str, state: &str| {
        let mut params = call.clone();
        params["inputResponses"] = json!({key: {"action": "accept"}});
        params["requestState"] = json!(state);
        params
    };
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), call.clone()).await?;
    let (key, link, state) = url_elicitation(&asked)?;
    let asked_again =
        setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), retry(&key, &state)).await?;
    let (key, link_again, state) = url_elicitation(&asked_again)?;
    assert_ne!(link, link_again, "a fresh link each time");
    let alices_return = setup.connected(&mut alice, &link_again, (0, 1, 2)).await?;
    let done = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps.clone(), retry(&key, &state)).await?;
    assert_eq!(text(&done["result"]), "alice", "the retried call goes on: {done}\n{}", setup.logs());
    // Her list now holds the upstream's own tools, not the stand-in; Bob's still does not.
    assert_eq!(tool_names(&setup, &alice).await?, ["files_whoami", "files_slow_whoami"]);
    assert_eq!(tool_names(&setup, &bob).await?, ["files_connect"]);

    // Bob connects (link on 2, back on 0 and 1) and calls again.
    setup.connected(&mut bob, &bobs_link, (2, 0, 1)).await?;
    assert_eq!(setup.whoami(&bob, None).await?, "bob");

    // A 2025-11-25 client declaring URL elicitation gets -32042, then calls again once connected.
    let init = json!({"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {"url": {}}},
        "clientInfo": {"name": "e2e", "version": "1"}});
    let carols_bearer = carol.bearer.clone();
    let auth = [("authorization", carols_bearer.as_str())];
    let opened = setup.client.legacy_with(&lb, &auth, "initialize", init, None).await?;
    let session = opened.session.clone().ok_or_else(|| anyhow::anyhow!("no session: {}", opened.body))?;
    let legacy_call = async || setup.client.legacy_with(&lb, &auth, "tools/call", call.clone(), Some(&session)).await;
    let refused = legacy_call().await?.json()?;
    assert_eq!(refused["error"]["code"], -32042, "{refused}");
    let elicitation = &refused["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{refused}");
    assert!(elicitation["elicitationId"].is_string(), "{refused}");
    let carols_link = elicitation["url"].as_str().unwrap_or_default().to_owned();
    setup.connected(&mut carol, &carols_link, (1, 2, 0)).await?;
    let answered = legacy_call().await?.json()?;
    assert_eq!(text(&answered["result"]), "carol", "{answered}");

    // Each user's calls, on every replica, carry their own token and nobody else's.
    for user in [&alice, &bob, &carol] {
        for i in 0..3 {
            assert_eq!(setup.whoami(user, Some(i)).await?, user.login, "{} on replica {i}", user.login);
        }
    }

    // Replayed: a spent link and an authorization's return, on every replica.
    for i in 0..3 {
        assert_eq!(get(&setup.on(i, &link_again)?).await?.0, StatusCode::GONE, "link replayed on {i}");
        assert_eq!(get(&setup.on(i, &alices_return)?).await?.0, StatusCode::GONE, "state replayed on {i}");
    }
    assert_eq!(setup.whoami(&alice, None).await?, "alice", "a replay changes nothing");

    // No token in clear in Redis; the metadata stays readable.
    let dump = dump(setup.redis_port())?;
    assert!(!holds_a_jwt(&dump), "a JWT in clear in the dump");
    assert!(!dump.contains("access_token") && !dump.contains("refresh_token"), "token fields in clear");
    assert!(dump.contains(setup.servers.issuer()), "the metadata stays readable");

    // Revoked by an operator: Bob is asked again (and sees the stand-in again).
    let bobs = principal_key(setup.servers.issuer(), "bob");
    assert_eq!(setup.admin(&["revoke", &bobs, UPSTREAM])?["revoked"], true);
    let again = setup.link_in_tool_error(&bob).await?;
    assert_ne!(again, bobs_link);

    // Disconnected by Alice with her own bearer: she is asked again, Carol is not.
    let url = format!("{}/oauth/connections/{UPSTREAM}", setup.cluster.replica_url(1).trim_end_matches("/mcp"));
    let http = reqwest::Client::new();
    let deleted = http.delete(&url).header("authorization", &alice.bearer).send().await?.status();
    assert_eq!(deleted, StatusCode::NO_CONTENT);
    let asked = setup.modern(&lb, &alice, "tools/call", url_elicitation_caps, call.clone()).await?;
    url_elicitation(&asked)?;
    assert_eq!(setup.whoami(&carol, None).await?, "carol");
    Ok(())
}
