//! mcpgate's upstream OAuth client (`mcpgate_upstream::oauth`) against real servers: a FastMCP
//! server that accepts only JWTs from `oidc-provider`, the authorization server it names. The
//! client reads the server's challenge, discovers and registers with the authorization server,
//! and a scripted user signs in and consents; then the codes it redeems and the tokens it
//! refreshes must be what the protected server and the authorization server say they are:
//! tokens for the right user and resource, rotation, and refusals of spent or foreign grants
//! (a replayed refresh token revokes its grant).

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use reqwest::Url;
use serde_json::{Value, json};

use mcpgate_e2e::{Client, OAuthServers, UserAgent};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{
    ClientRegistration, Discovered, OAuthClient, Pkce, TokenSet, authorization_url, check_response_issuer,
    scopes_to_request,
};

/// Where the authorization server sends the user back; nothing listens there (the user agent
/// stops at the redirect).
const REDIRECT_URI: &str = "http://127.0.0.1:9/oauth/callback";

/// Access tokens outlive every test (refresh is asked for, never forced by expiry).
const TOKEN_TTL: Duration = Duration::from_secs(300);

/// The client side of one upstream: discovered and registered.
struct Upstream {
    oauth: OAuthClient,
    endpoint: Url,
    discovered: Discovered,
    client: ClientRegistration,
    scope: Option<String>,
}

/// A code as the user agent brought it back, with the PKCE verifier of its request.
struct Authorized {
    code: String,
    pkce: Pkce,
}

/// Challenge, discovery and registration, checking what each found.
async fn connect(servers: &OAuthServers) -> anyhow::Result<Upstream> {
    let oauth = OAuthClient::new(Duration::from_secs(30))?;
    let endpoint = Url::parse(servers.endpoint())?;
    let challenge =
        oauth.challenge(&endpoint).await?.expect("the protected server challenges a request without a token");
    let metadata = challenge.resource_metadata.as_deref().expect("the challenge names the resource metadata");
    assert!(
        metadata
            .starts_with(&format!("{}/.well-known/oauth-protected-resource", endpoint.origin().ascii_serialization())),
        "resource metadata at {metadata}"
    );
    let discovered = oauth.discover(&endpoint, Some(&challenge)).await?;
    assert_eq!(discovered.resource.resource, servers.endpoint(), "the resource is the server's /mcp URL");
    assert_eq!(discovered.issuer, servers.issuer());
    assert_eq!(discovered.server.issuer, servers.issuer());
    let client = oauth.register(&discovered.server, "mcpgate-e2e", REDIRECT_URI).await?;
    assert!(!client.client_id.is_empty(), "registered: {client:?}");
    let scope = scopes_to_request(challenge.scope.as_deref(), &discovered.resource, &discovered.server, None);
    assert_eq!(scope.as_deref(), Some("mcp:tools offline_access"), "the challenge's scope, and a refresh token");
    Ok(Upstream { oauth, endpoint, discovered, client, scope })
}

/// `login` authorizes the gateway at the authorization server; returns the code once its
/// `state` and `iss` check out.
async fn authorize(upstream: &Upstream, login: &str) -> anyhow::Result<Authorized> {
    let pkce = Pkce::generate()?;
    // Another fresh verifier is 256 random bits: as good a state as any.
    let state = Pkce::generate()?.verifier;
    let server = &upstream.discovered.server;
    let url = authorization_url(
        server,
        &upstream.client.client_id,
        REDIRECT_URI,
        &pkce,
        &state,
        upstream.scope.as_deref(),
        &upstream.discovered.resource.resource,
    )?;
    let back = UserAgent::new()?.authorize(&url, login, REDIRECT_URI).await?;
    let query = |name: &str| back.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    assert_eq!(query("error"), None, "the authorization was refused: {back}");
    assert_eq!(query("state").as_deref(), Some(state.as_str()), "the state comes back: {back}");
    let iss = query("iss");
    assert_eq!(iss.as_deref(), Some(upstream.discovered.issuer.as_str()), "RFC 9207 iss: {back}");
    check_response_issuer(server, iss.as_deref())?;
    let code = query("code").unwrap_or_else(|| panic!("no code in {back}"));
    Ok(Authorized { code, pkce })
}

async fn redeem(upstream: &Upstream, code: &str, pkce: &Pkce) -> Result<TokenSet, UpstreamError> {
    let resource = &upstream.discovered.resource.resource;
    upstream.oauth.redeem(&upstream.discovered.server, &upstream.client, code, REDIRECT_URI, pkce, resource).await
}

async fn refresh(upstream: &Upstream, refresh_token: &str) -> Result<TokenSet, UpstreamError> {
    let resource = &upstream.discovered.resource.resource;
    upstream.oauth.refresh(&upstream.discovered.server, &upstream.client, refresh_token, resource).await
}

/// The payload of a JWT, unverified (the protected server verifies; this reads what it got).
fn claims(jwt: &str) -> anyhow::Result<Value> {
    let payload = jwt.split('.').nth(1).ok_or_else(|| anyhow::anyhow!("not a JWT"))?;
    Ok(serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload)?)?)
}

/// Asserts `tokens` are a JWT for `sub` and the upstream's resource, with a refresh token.
fn assert_issued_for(tokens: &TokenSet, sub: &str, upstream: &Upstream) -> anyhow::Result<()> {
    let claims = claims(&tokens.access_token)?;
    assert_eq!(claims["sub"], sub, "{claims}");
    assert_eq!(claims["aud"], upstream.endpoint.as_str(), "{claims}");
    assert!(tokens.refresh_token.is_some(), "a refresh token with offline_access: {tokens:?}");
    Ok(())
}

/// What the protected server's `whoami` tool says the bearer of `access_token` is.
async fn whoami(upstream: &Upstream, access_token: &str) -> anyhow::Result<String> {
    let client = Client::new()?;
    let bearer = format!("Bearer {access_token}");
    let params = json!({"name": "whoami", "arguments": {}});
    let reply =
        client.modern_with(upstream.endpoint.as_str(), &[("authorization", &bearer)], "tools/call", params).await?;
    anyhow::ensure!(reply.status == 200, "{}: {}", reply.status, reply.body);
    let answer = reply.message(&1.into()).ok_or_else(|| anyhow::anyhow!("no answer in {}", reply.body))?;
    let text = answer["result"]["content"][0]["text"].as_str();
    Ok(text.ok_or_else(|| anyhow::anyhow!("no text in {answer}"))?.to_owned())
}

fn assert_refused(result: Result<TokenSet, UpstreamError>, what: &str) {
    match result {
        Err(UpstreamError::AuthorizationRefused { error, .. }) => assert_eq!(error, "invalid_grant", "{what}"),
        other => panic!("{what}: expected invalid_grant, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_gets_tokens_for_the_discovered_resource_that_the_protected_server_accepts() -> anyhow::Result<()> {
    let servers = OAuthServers::start(TOKEN_TTL)?;
    let upstream = connect(&servers).await?;

    let alice = authorize(&upstream, "alice").await?;
    let alice = redeem(&upstream, &alice.code, &alice.pkce).await?;
    assert_issued_for(&alice, "alice", &upstream)?;
    assert_eq!(whoami(&upstream, &alice.access_token).await?, "alice", "{}", servers.logs());

    let bob = authorize(&upstream, "bob").await?;
    let bob = redeem(&upstream, &bob.code, &bob.pkce).await?;
    assert_issued_for(&bob, "bob", &upstream)?;
    assert_ne!(bob.access_token, alice.access_token);
    assert_eq!(whoami(&upstream, &bob.access_token).await?, "bob", "{}", servers.logs());

    // Without a token the tool is not reached: the answers above came from the tokens.
    let anonymous = Client::new()?
        .modern(upstream.endpoint.as_str(), "tools/call", json!({"name": "whoami", "arguments": {}}))
        .await?;
    assert_eq!(anonymous.status, 401, "{}", anonymous.body);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_rotates_the_refresh_token_and_the_spent_one_is_refused() -> anyhow::Result<()> {
    let servers = OAuthServers::start(TOKEN_TTL)?;
    let upstream = connect(&servers).await?;
    let authorized = authorize(&upstream, "alice").await?;
    let first = redeem(&upstream, &authorized.code, &authorized.pkce).await?;
    let spent = first.refresh_token.clone().expect("a refresh token");

    let second = refresh(&upstream, &spent).await?;
    assert_issued_for(&second, "alice", &upstream)?;
    assert_ne!(second.access_token, first.access_token, "a new access token");
    assert_ne!(second.refresh_token.as_deref(), Some(spent.as_str()), "a rotated refresh token");
    assert_eq!(whoami(&upstream, &second.access_token).await?, "alice", "{}", servers.logs());

    assert_refused(refresh(&upstream, &spent).await, "the spent refresh token again");
    // Spending a rotated token again revokes the whole grant (RFC 9700 rotation): the gateway
    // must never let two replicas spend one refresh token.
    let rotated = second.refresh_token.expect("a rotated refresh token");
    assert_refused(refresh(&upstream, &rotated).await, "the rotated refresh token after a replay");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_code_is_redeemed_once_and_only_with_its_own_verifier() -> anyhow::Result<()> {
    let servers = OAuthServers::start(TOKEN_TTL)?;
    let upstream = connect(&servers).await?;

    let authorized = authorize(&upstream, "alice").await?;
    assert_refused(redeem(&upstream, &authorized.code, &Pkce::generate()?).await, "a code with another PKCE verifier");
    let foreign = authorize(&upstream, "bob").await?;
    redeem(&upstream, &foreign.code, &foreign.pkce).await?;
    assert_refused(redeem(&upstream, &foreign.code, &foreign.pkce).await, "a code redeemed twice");
    Ok(())
}
