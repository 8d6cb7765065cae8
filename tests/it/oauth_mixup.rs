//! A hostile `auth = "oauth"` upstream against the gateway's OAuth client, with real servers:
//! an honest `oidc-provider` that sends no RFC 9207 `iss` (as many servers do not) protecting a
//! FastMCP server, and a hostile upstream with its own authorization server (one Node process).
//!
//! - The mix-up (RFC 9700 §4.4): the hostile server's authorization endpoint forwards the user's
//!   browser to the honest server with the gateway's client id there, the same `state` and code
//!   challenge, keeping the redirect URI it was sent or using the honest flow's. The honest
//!   server's code never reaches the hostile token endpoint (where it would arrive with the
//!   PKCE verifier): the honest server refuses a redirect URI its client does not hold, and the
//!   gateway refuses a response at another flow's redirect URI.
//! - SSRF through discovery: the hostile upstream's metadata names an authorization server at a
//!   link-local (cloud metadata) or private address; the gateway refuses it with an error naming
//!   the setting, before any request.
//!
//! The gateway runs with `verify_user = false` (no sign-in at its own issuer: not what is under
//! test), and the test, as in oauth_connect.rs, mints links as a replica does and carries each
//! redirect under the public URL to the replica.

use std::io::Write as _;
use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde_json::json;

use mcpgate_e2e::{CLUSTER_SEAL_KEYS, Cluster, HostileOAuthServer, OAuthServers, UserAgent};
use mcpgate_seal::{Binding, KeyRing, Purpose, Sealer, context_digest};
use mcpgate_upstream::oauth::Pkce;

const PUBLIC_URL: &str = "http://127.0.0.1:9";
/// Every redirect URI of the gateway's is under this.
const CALLBACKS: &str = "http://127.0.0.1:9/oauth/callback";
const HS256_SECRET: &str = "oauth-mixup-e2e-secret-0123456789abcdef";

struct Setup {
    honest: OAuthServers,
    hostile: HostileOAuthServer,
    cluster: Cluster,
    _config: tempfile::NamedTempFile,
}

impl Setup {
    async fn start() -> anyhow::Result<Self> {
        let honest = OAuthServers::start_without_iss(Duration::from_secs(300))?;
        let hostile = HostileOAuthServer::start()?;
        let mut config = tempfile::NamedTempFile::new()?;
        write!(
            config,
            r#"
[server]
public_url = "{PUBLIC_URL}"
[auth]
mode = "jwt"
resource = "{PUBLIC_URL}/mcp"
authorization_servers = ["{issuer}"]
[auth.jwt]
issuer = "{issuer}"
algorithms = ["HS256"]
hs256_secrets = ["{HS256_SECRET}"]
[auth.browser_login]
verify_user = false
[federation]
startup_wait_secs = 5
[[upstream]]
name = "honest"
transport = "http"
url = "{honest_url}"
auth = "oauth"
[[upstream]]
name = "hostile"
transport = "http"
url = "{hostile_url}"
auth = "oauth"
"#,
            issuer = honest.issuer(),
            honest_url = honest.endpoint(),
            hostile_url = hostile.endpoint(),
        )?;
        let path = config.path().to_str().unwrap_or_default().to_owned();
        let cluster = Cluster::builder(1).args(&["--config", &path]).start()?;
        Ok(Self { honest, hostile, cluster, _config: config })
    }

    fn logs(&self) -> String {
        format!("{}\n{}\n{}", self.honest.logs(), self.hostile.logs(), self.cluster.replica(0).logs())
    }

    /// `url` (under the public URL) as requested of the replica.
    fn on(&self, url: &str) -> anyhow::Result<Url> {
        let rest = url.strip_prefix(PUBLIC_URL).ok_or_else(|| anyhow::anyhow!("{url} is not under {PUBLIC_URL}"))?;
        Ok(Url::parse(&format!("{}{rest}", self.cluster.replica_url(0).trim_end_matches("/mcp")))?)
    }

    /// A connect link for `sub` to `upstream`, as a replica mints one.
    fn link(&self, sub: &str, upstream: &str) -> anyhow::Result<String> {
        let issuer = self.honest.issuer();
        let payload = json!({
            "principal": format!("{}:{issuer}{sub}", issuer.len()), "issuer": issuer, "subject": sub,
            "upstream": upstream, "scopes": null, "nonce": Pkce::generate()?.verifier,
        });
        let context = context_digest(&[b"connect-link"]);
        let binding = Binding { purpose: Purpose::OAuthFlow, principal: "", method: "connect-link", context: &context };
        let sealer = Sealer::new(KeyRing::parse(&[CLUSTER_SEAL_KEYS])?, 16 * 1024);
        let sealed = sealer.seal(&binding, now_ms() + 600_000, payload.to_string().as_bytes())?;
        Ok(format!("{PUBLIC_URL}/oauth/connect/{sealed}"))
    }

    /// `sub` opens a link to `upstream` in `agent`: where the gateway sends the browser.
    async fn open_link(&self, agent: &mut UserAgent, sub: &str, upstream: &str) -> anyhow::Result<Url> {
        let (status, location, body) = agent.open(&self.on(&self.link(sub, upstream)?)?).await?;
        anyhow::ensure!(status == StatusCode::FOUND, "opening {sub}'s link to {upstream}: {status} {body}");
        location.ok_or_else(|| anyhow::anyhow!("no Location"))
    }

    /// The token requests that reached the hostile server's token endpoint.
    async fn hostile_token_requests(&self) -> anyhow::Result<Vec<serde_json::Value>> {
        Ok(self.hostile.seen().await?["token_requests"].as_array().cloned().unwrap_or_default())
    }
}

fn now_ms() -> u64 {
    u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()))
        .unwrap_or(u64::MAX)
}

fn query(url: &Url, name: &str) -> Option<String> {
    url.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_authorization_server_never_gets_the_honest_servers_code() -> anyhow::Result<()> {
    let setup = Setup::start().await?;

    // The positive control, and the attacker learning the gateway's client at the honest
    // server: Mallory connects the honest upstream as any user does.
    let mut mallory = UserAgent::new()?;
    let authorize = setup.open_link(&mut mallory, "mallory", "honest").await?;
    anyhow::ensure!(authorize.as_str().starts_with(setup.honest.issuer()), "the honest server: {authorize}");
    let client_id = query(&authorize, "client_id").expect("a client id");
    let honest_redirect = query(&authorize, "redirect_uri").expect("a redirect URI");
    let back = mallory.authorize(&authorize, "mallory", CALLBACKS).await?;
    assert!(!back.query_pairs().any(|(k, _)| k == "iss"), "this honest server sends no iss: {back}");
    let (status, _, page) = mallory.open(&setup.on(back.as_str())?).await?;
    assert_eq!(status, StatusCode::OK, "Mallory connects the honest upstream: {page}\n{}", setup.logs());

    // Two ways to mix up: the redirect URI the hostile flow was sent with, or the honest one.
    let mut endpoint = authorize.clone();
    endpoint.set_query(None);
    for redirect in [None, Some(honest_redirect.as_str())] {
        setup
            .hostile
            .control(json!({"forward": {
                "authorization_endpoint": endpoint.as_str(), "client_id": client_id,
                "resource": setup.honest.endpoint(), "scope": query(&authorize, "scope"),
                "redirect_uri": redirect,
            }}))
            .await?;
        // Alice connects the hostile upstream; its server sends her to the honest one, where
        // she has an account and approves what looks like the gateway's request.
        let mut alice = UserAgent::new()?;
        let to_hostile = setup.open_link(&mut alice, "alice", "hostile").await?;
        anyhow::ensure!(to_hostile.as_str().starts_with(setup.hostile.issuer()), "the hostile server: {to_hostile}");
        match alice.authorize(&to_hostile, "alice", CALLBACKS).await {
            // The honest server refused the redirect URI: its client at the honest server
            // holds only the honest flow's.
            Err(refused) => assert!(redirect.is_none(), "with the honest redirect URI: {refused}\n{}", setup.logs()),
            Ok(back) => {
                let (status, _, page) = alice.open(&setup.on(back.as_str())?).await?;
                assert_ne!(status, StatusCode::OK, "nothing connected: {page}");
                if redirect.is_some() {
                    assert_eq!(status, StatusCode::FORBIDDEN, "{page}\n{}", setup.logs());
                    assert!(page.contains("another server"), "{page}");
                }
            }
        }
        let reached = setup.hostile_token_requests().await?;
        assert!(
            reached.is_empty(),
            "the honest server's code reached the hostile token endpoint ({redirect:?}): {reached:?}\n{}",
            setup.logs()
        );
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authorization_server_at_a_private_or_link_local_address_is_refused_before_any_request() -> anyhow::Result<()>
{
    let setup = Setup::start().await?;
    for (server, kind) in [("https://169.254.169.254", "link-local"), ("https://10.255.0.7/tenant", "private")] {
        setup.hostile.control(json!({"authorization_servers": [server]})).await?;
        let mut alice = UserAgent::new()?;
        let (status, _, page) = alice.open(&setup.on(&setup.link("alice", "hostile")?)?).await?;
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{server}: {page}\n{}", setup.logs());
        let logs = setup.cluster.replica(0).logs();
        let line = logs.lines().rev().find(|l| l.contains("a connection step failed")).unwrap_or_default();
        assert!(
            line.contains(kind) && line.contains("no request made") && line.contains("allow_private_addresses"),
            "{server}: the log names the address and the setting: {line}\n{logs}"
        );
    }
    Ok(())
}
