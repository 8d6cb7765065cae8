//! Calls to an `auth = "oauth"` upstream (mcpgate's upstream crate, in-process) against real
//! servers: the FastMCP server that accepts only `oidc-provider`'s JWTs for it, and answers
//! `whoami` with the token's `sub`. Users sign in and consent with the scripted user agent;
//! their tokens sit in a stand-in for the gateway's vault (an in-memory `Connections` that
//! refreshes at the real authorization server). Each user's calls reach the upstream with
//! their own token; a caller without a connection sees only the connect stand-in; an expired
//! token is refreshed once and the call goes on; a revoked grant asks to connect again.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::Url;
use serde_json::{Value, json};

use mcpgate_e2e::{OAuthServers, PATIENCE, UserAgent, wait_for};
use mcpgate_protocol::Era;
use mcpgate_protocol::capabilities::ClientCapabilities;
use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_runtime::catalog::{BoxFuture, Catalog, CatalogBuilder, ListRendering, Outcome, ToolCall, ToolContext};
use mcpgate_runtime::{Credential, Principal};
use mcpgate_upstream::oauth::{
    BearerChallenge, ClientRegistration, Connections, Discovered, HeldToken, OAuthClient, Pkce, Refusal, TokenSet,
    authorization_url, scopes_to_request,
};
use mcpgate_upstream::{Federation, UpstreamAuth, UpstreamConfig, UpstreamError};

const REDIRECT_URI: &str = "http://127.0.0.1:9/oauth/callback";
/// Short enough that a test outlives a token, long enough that a refreshed token outlives the
/// few calls after it on a loaded 2-core machine (with 2 s, a slow run saw it expire again
/// and refresh twice).
const TOKEN_TTL: Duration = Duration::from_secs(6);

/// The vault stand-in: each principal's tokens, refreshed at the real authorization server.
struct Vault {
    oauth: OAuthClient,
    discovered: Discovered,
    client: ClientRegistration,
    scope: Option<String>,
    tokens: Mutex<HashMap<String, TokenSet>>,
    refreshes: AtomicU32,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault")
    }
}

impl Vault {
    async fn discover(servers: &OAuthServers) -> anyhow::Result<Self> {
        let oauth = OAuthClient::new(Duration::from_secs(30))?;
        let endpoint = Url::parse(servers.endpoint())?;
        let challenge = oauth.challenge(&endpoint).await?.expect("the protected server challenges");
        let discovered = oauth.discover(&endpoint, Some(&challenge)).await?;
        let client = oauth.register(&discovered.server, "mcpgate-e2e", REDIRECT_URI).await?;
        let scope = scopes_to_request(challenge.scope.as_deref(), &discovered.resource, &discovered.server, None);
        Ok(Self { oauth, discovered, client, scope, tokens: Mutex::default(), refreshes: AtomicU32::new(0) })
    }

    /// `login` signs in and consents; their tokens are kept for `principal`.
    async fn connect(&self, principal: &Principal, login: &str) -> anyhow::Result<()> {
        let pkce = Pkce::generate()?;
        let state = Pkce::generate()?.verifier;
        let resource = &self.discovered.resource.resource;
        let url = authorization_url(
            &self.discovered.server,
            &self.client.client_id,
            REDIRECT_URI,
            &pkce,
            &state,
            self.scope.as_deref(),
            resource,
        )?;
        let back = UserAgent::new()?.authorize(&url, login, REDIRECT_URI).await?;
        let code = back.query_pairs().find(|(k, _)| k == "code").map(|(_, v)| v.into_owned());
        let code = code.ok_or_else(|| anyhow::anyhow!("no code in {back}"))?;
        let tokens =
            self.oauth.redeem(&self.discovered.server, &self.client, &code, REDIRECT_URI, &pkce, resource).await?;
        self.tokens.lock().unwrap().insert(principal.key().to_owned(), tokens);
        Ok(())
    }

    fn required(upstream: &str, principal: &Principal) -> UpstreamError {
        UpstreamError::ConnectionRequired {
            upstream: upstream.to_owned(),
            url: format!("https://gateway.example/oauth/connect/{}", principal.subject()),
            elicitation_id: format!("connect-{}", principal.subject()),
        }
    }
}

impl Connections for Vault {
    fn bearer<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(async move {
            let tokens = self.tokens.lock().unwrap().get(principal.key()).map(|t| t.access_token.clone());
            tokens.map(|t| Credential::bearer(&t)).ok_or_else(|| Self::required(upstream, principal))
        })
    }

    fn lookup<'a>(
        &'a self,
        _: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<HeldToken>, UpstreamError>> {
        Box::pin(async move {
            let token = self.tokens.lock().unwrap().get(principal.key()).map(|t| t.access_token.clone());
            Ok(token.map(|t| HeldToken::new(Credential::bearer(&t), None)))
        })
    }

    fn refused<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
        _stale: &'a Credential,
        refusal: Refusal,
        _challenge: Option<&'a BearerChallenge>,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(async move {
            let key = principal.key().to_owned();
            let held = self.tokens.lock().unwrap().get(&key).and_then(|t| t.refresh_token.clone());
            let (Refusal::Unauthorized, Some(refresh_token)) = (refusal, held) else {
                return Err(Self::required(upstream, principal));
            };
            self.refreshes.fetch_add(1, Ordering::SeqCst);
            let resource = &self.discovered.resource.resource;
            match self.oauth.refresh(&self.discovered.server, &self.client, &refresh_token, resource).await {
                Ok(fresh) => {
                    let access = Credential::bearer(&fresh.access_token);
                    self.tokens.lock().unwrap().insert(key, fresh);
                    Ok(access)
                }
                Err(_) => {
                    self.tokens.lock().unwrap().remove(&key);
                    Err(Self::required(upstream, principal))
                }
            }
        })
    }
}

fn user(name: &str) -> Principal {
    Principal::new("https://gateway-issuer.example/", name, Vec::new())
}

async fn catalog(servers: &OAuthServers, vault: &Arc<Vault>) -> anyhow::Result<(Federation, Catalog)> {
    let mut config = UpstreamConfig::http("files", servers.endpoint());
    config.auth = UpstreamAuth::Oauth;
    let federation = Federation::new(vec![config], "_")?;
    federation.set_connections(vault.clone());
    let lists = federation.discover(Duration::from_secs(10)).await;
    let mut builder = CatalogBuilder::default();
    federation.register(&mut builder, &lists);
    let rendering = ListRendering {
        server_info: Arc::new(Implementation::new("mcpgate", "e2e")),
        ttl_ms: 60_000,
        cache_scope: CacheScope::Public,
        legacy_task_support: true,
    };
    let catalog = builder.build(&rendering)?;
    Ok((federation, catalog))
}

async fn names(catalog: &Catalog, principal: &Principal) -> anyhow::Result<Vec<String>> {
    let list: Value = serde_json::from_slice(&catalog.tools_list(Era::Modern, principal).await?)?;
    let tools = list["tools"].as_array().cloned().unwrap_or_default();
    Ok(tools.iter().filter_map(|t| t["name"].as_str().map(str::to_owned)).collect())
}

/// What `whoami` says through the catalog for `principal`: (isError, text).
async fn whoami(catalog: &Catalog, principal: &Principal) -> anyhow::Result<(bool, String)> {
    let (tool, _) = catalog.find("files_whoami", principal).await.ok_or_else(|| anyhow::anyhow!("no files_whoami"))?;
    let cx = ToolContext::detached(principal.clone(), ClientCapabilities::default());
    match tool.call(ToolCall { arguments: json!({}), ..ToolCall::default() }, &cx).await {
        Outcome::Complete(result) => {
            let result = serde_json::to_value(result)?;
            Ok((result["isError"] == true, result["content"][0]["text"].as_str().unwrap_or_default().to_owned()))
        }
        other => anyhow::bail!("not a tool result: {other:?}"),
    }
}

/// Waits (bounded) until the protected server answers `principal`'s access token (as the
/// vault holds it now) with 401: it expired.
async fn until_refused(servers: &OAuthServers, vault: &Vault, principal: &Principal) -> anyhow::Result<()> {
    let token = vault.tokens.lock().unwrap().get(principal.key()).map(|t| t.access_token.clone());
    let token = token.ok_or_else(|| anyhow::anyhow!("{} holds no token", principal.subject()))?;
    let http = reqwest::Client::new();
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}}});
    wait_for(format!("the upstream to refuse {}'s expired token", principal.subject()), PATIENCE, async || {
        let answer = http
            .post(servers.endpoint())
            .bearer_auth(&token)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(initialize.to_string())
            .send()
            .await?;
        Ok(answer.status() == reqwest::StatusCode::UNAUTHORIZED)
    })
    .await;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_reaches_the_protected_upstream_with_their_own_token_refreshed_when_it_expires() -> anyhow::Result<()>
{
    let servers = OAuthServers::start(TOKEN_TTL)?;
    let vault = Arc::new(Vault::discover(&servers).await?);
    let (alice, bob, carol) = (user("alice"), user("bob"), user("carol"));
    vault.connect(&alice, "alice").await?;
    vault.connect(&bob, "bob").await?;
    let (_federation, catalog) = catalog(&servers, &vault).await?;

    assert_eq!(names(&catalog, &alice).await?, ["files_whoami", "files_slow_whoami"], "{}", servers.logs());
    assert_eq!(names(&catalog, &carol).await?, ["files_connect"], "no connection: the stand-in only");
    assert_eq!(whoami(&catalog, &alice).await?, (false, "alice".to_owned()), "{}", servers.logs());
    assert_eq!(whoami(&catalog, &bob).await?, (false, "bob".to_owned()), "{}", servers.logs());
    let (is_error, said) = whoami(&catalog, &carol).await?;
    assert!(is_error && said.contains("/oauth/connect/carol"), "carol is asked to connect: {said}");

    // Once the upstream refuses alice's token (it expired: waited for as the upstream sees it,
    // not for its lifetime), it is refreshed once, and the call goes on with the fresh one.
    until_refused(&servers, &vault, &alice).await?;
    let before = vault.refreshes.load(Ordering::SeqCst);
    assert_eq!(whoami(&catalog, &alice).await?, (false, "alice".to_owned()), "{}", servers.logs());
    assert_eq!(vault.refreshes.load(Ordering::SeqCst) - before, 1, "one refresh for one expired token");

    // A grant that cannot be refreshed any more (here: its refresh token replaced by garbage,
    // as after a revocation) asks bob to connect again.
    if let Some(tokens) = vault.tokens.lock().unwrap().get_mut(bob.key()) {
        tokens.refresh_token = Some("revoked".to_owned());
    }
    let (is_error, said) = whoami(&catalog, &bob).await?;
    assert!(is_error && said.contains("/oauth/connect/bob"), "bob is asked to connect again: {said}");
    assert_eq!(names(&catalog, &bob).await?, ["files_connect"], "and sees the stand-in again");
    Ok(())
}
