//! Users connecting their own accounts at an `auth = "oauth"` upstream, in a browser, through
//! two replicas with Redis: the connect link opened on one replica, the sign-in at the
//! gateway's issuer and the upstream's authorization coming back to the other; each user's
//! tokens stored sealed and theirs (the protected server names the user they were issued
//! for); a replayed link, sign-in state or authorization state refused; user B opening user
//! A's link refused with nothing stored; a sign-in's return or an authorization URL forwarded
//! by the link's owner to another browser refused with nothing stored; disconnecting with the
//! caller's own bearer.
//!
//! The real parts: `oidc-provider` is both the gateway's issuer (the sign-in, where the test
//! registers the gateway as a client) and the upstream's authorization server, the FastMCP
//! server verifies its tokens, a scripted user agent signs in and consents. Until calls
//! through the gateway hand out links, the test mints a link as a replica does (sealed with
//! the cluster's key), and `server.public_url` names no listener: the test is the browser, and
//! carries each redirect to the replica it chooses.

use std::io::Write as _;
use std::time::Duration;

use reqwest::header::LOCATION;
use reqwest::{StatusCode, Url};
use serde_json::{Value, json};

use mcpgate_e2e::{CLUSTER_SEAL_KEYS, Client, Cluster, OAuthServers, UserAgent, run_to_end};
use mcpgate_seal::{AtRest, Binding, KeyRing, Purpose, RecordBinding, Sealer, context_digest};
use mcpgate_store::{RedisOptions, RedisStore, Vault as _, VaultKey, VaultKind};
use mcpgate_upstream::oauth::Pkce;

use crate::at_rest::dump;

/// Where browsers are sent (nothing listens: the test takes each request to a replica).
const PUBLIC_URL: &str = "http://127.0.0.1:9";
const LOGIN_CALLBACK: &str = "http://127.0.0.1:9/oauth/login/callback";
const CALLBACK: &str = "http://127.0.0.1:9/oauth/callback";
const RESOURCE: &str = "http://127.0.0.1:9/mcp";
const HS256_SECRET: &str = "oauth-connect-e2e-secret-0123456789abcdef";
const UPSTREAM: &str = "files";
pub(crate) const ADMIN_TOKEN: &str = "oauth-connect-e2e-admin-token-0123456789";

pub(crate) struct Setup {
    pub(crate) servers: OAuthServers,
    pub(crate) cluster: Cluster,
    _config: tempfile::NamedTempFile,
}

impl Setup {
    pub(crate) async fn start() -> anyhow::Result<Self> {
        let servers = OAuthServers::start(Duration::from_secs(300))?;
        let (client_id, client_secret) = servers.register_client(LOGIN_CALLBACK).await?;
        let issuer = servers.issuer();
        let mut config = tempfile::NamedTempFile::new()?;
        write!(
            config,
            r#"
[server]
public_url = "{PUBLIC_URL}"
[auth]
mode = "jwt"
resource = "{RESOURCE}"
authorization_servers = ["{issuer}"]
[auth.jwt]
issuer = "{issuer}"
algorithms = ["HS256"]
hs256_secrets = ["{HS256_SECRET}"]
[auth.browser_login]
client_id = "{client_id}"
client_secret = "{client_secret}"
[federation]
startup_wait_secs = 5
[admin]
listen = "127.0.0.1:0"
token = "{ADMIN_TOKEN}"
[[upstream]]
name = "{UPSTREAM}"
transport = "http"
url = "{}"
auth = "oauth"
"#,
            servers.endpoint()
        )?;
        let path = config.path().to_str().unwrap_or_default().to_owned();
        let cluster = Cluster::builder(2).args(&["--config", &path]).start()?;
        Ok(Self { servers, cluster, _config: config })
    }

    /// `url` (under the public URL) as requested of replica `i`.
    pub(crate) fn on(&self, i: usize, url: &str) -> anyhow::Result<String> {
        let rest = url.strip_prefix(PUBLIC_URL).ok_or_else(|| anyhow::anyhow!("{url} is not under {PUBLIC_URL}"))?;
        Ok(format!("{}{rest}", self.cluster.replica_url(i).trim_end_matches("/mcp")))
    }

    /// A connect link for `sub`, as a replica mints one.
    pub(crate) fn link(&self, sub: &str) -> anyhow::Result<String> {
        let issuer = self.servers.issuer();
        let payload = json!({
            "principal": principal_key(issuer, sub), "issuer": issuer, "subject": sub,
            "upstream": UPSTREAM, "scopes": null, "nonce": Pkce::generate()?.verifier,
        });
        let context = context_digest(&[b"connect-link"]);
        let binding = Binding { purpose: Purpose::OAuthFlow, principal: "", method: "connect-link", context: &context };
        let sealed = sealer()?.seal(&binding, now_ms() + 600_000, payload.to_string().as_bytes())?;
        Ok(format!("{PUBLIC_URL}/oauth/connect/{sealed}"))
    }

    pub(crate) async fn vault(&self) -> anyhow::Result<RedisStore> {
        let port = self.cluster_redis_port();
        Ok(RedisStore::connect(RedisOptions {
            url: format!("redis://127.0.0.1:{port}"),
            sentinel: None,
            cluster: false,
            prefix: "mcpgate".to_owned(),
            shards: 16,
            pool_size: 1,
            command_timeout: Duration::from_secs(2),
            at_rest: None,
            at_rest_window: Duration::from_secs(900),
            replicas_ack: 0,
            replicas_ack_timeout: Duration::ZERO,
            tls_ca_pem: None,
        })
        .await?)
    }

    pub(crate) fn cluster_redis_port(&self) -> u16 {
        // `redis()` needs `&mut`; the port is fixed for the cluster's life.
        let env = self.cluster.env();
        let url = env.iter().find(|(k, _)| k == "MCPGATE_REDIS_URL").map(|(_, v)| v.as_str()).unwrap_or_default();
        url.rsplit(':').next().and_then(|p| p.trim_end_matches('/').parse().ok()).unwrap_or_default()
    }

    /// `sub`'s stored access token, opened as the gateway opens it.
    async fn stored_token(&self, sub: &str) -> anyhow::Result<Option<String>> {
        let store = self.vault().await?;
        let key = principal_key(self.servers.issuer(), sub);
        let Some(entry) = store.vault_get(&VaultKey::new(VaultKind::Connection, &key, UPSTREAM)).await? else {
            return Ok(None);
        };
        anyhow::ensure!(AtRest::is_sealed(&entry.value), "the record's value is sealed");
        let meta: Value = serde_json::from_str(&entry.meta)?;
        anyhow::ensure!(meta["issuer"] == self.servers.issuer() && meta.get("access_token").is_none(), "{meta}");
        let binding = RecordBinding::new("oauth-connection", &[&key, UPSTREAM, self.servers.issuer()]);
        let plain = AtRest::new(&sealer()?, true).open("oauth-connection", &binding, "tokens", entry.value)?;
        let record: Value = serde_json::from_str(&plain)?;
        Ok(record["access_token"].as_str().map(str::to_owned))
    }
}

pub(crate) fn sealer() -> anyhow::Result<Sealer> {
    Ok(Sealer::new(KeyRing::parse(&[CLUSTER_SEAL_KEYS])?, 16 * 1024))
}

/// `Principal::key()` of (`issuer`, `sub`).
pub(crate) fn principal_key(issuer: &str, sub: &str) -> String {
    format!("{}:{issuer}{sub}", issuer.len())
}

fn now_ms() -> u64 {
    u64::try_from(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis()))
        .unwrap_or(u64::MAX)
}

/// A GET without following redirects: status, `Location`, body.
async fn get(url: &str) -> anyhow::Result<(StatusCode, Option<String>, String)> {
    let http = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let response = http.get(url).send().await?;
    let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Ok((response.status(), location, response.text().await?))
}

/// A redirect's target, asserting it is one.
fn redirected(answer: (StatusCode, Option<String>, String), what: &str) -> anyhow::Result<Url> {
    let (status, location, body) = answer;
    anyhow::ensure!(status == StatusCode::FOUND, "{what}: {status} {body}");
    Ok(Url::parse(&location.ok_or_else(|| anyhow::anyhow!("{what}: no Location"))?)?)
}

/// What the protected server's `whoami` says the bearer of `token` is.
async fn whoami(endpoint: &str, token: &str) -> anyhow::Result<String> {
    let bearer = format!("Bearer {token}");
    let params = json!({"name": "whoami", "arguments": {}});
    let reply = Client::new()?.modern_with(endpoint, &[("authorization", &bearer)], "tools/call", params).await?;
    let answer = reply.message(&1.into()).ok_or_else(|| anyhow::anyhow!("no answer: {}", reply.body))?;
    Ok(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned())
}

/// Whether `text` holds something shaped like a JWT (`eyJ…​.eyJ`): sealed values are
/// base64url without dots, so a match is a token in clear.
pub(crate) fn holds_a_jwt(text: &str) -> bool {
    text.match_indices("eyJ").any(|(at, _)| {
        let rest = &text[at..];
        let body = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
        rest[body..].starts_with(".eyJ")
    })
}

/// `url` (under the public URL) opened on replica `i` by `agent`: a redirect's target.
async fn step(setup: &Setup, agent: &mut UserAgent, i: usize, url: &str, what: &str) -> anyhow::Result<Url> {
    let (status, location, body) = agent.open(&Url::parse(&setup.on(i, url)?)?).await?;
    redirected((status, location.map(String::from), body), what)
}

/// The user `login` opens `link` on replica `first`; the sign-in and the authorization come
/// back to replica `second`, all in `agent` (the gateway's cookie kept). Returns the final
/// page's status and text, and the login and authorization callback URLs (to replay).
pub(crate) async fn connect(
    setup: &Setup,
    agent: &mut UserAgent,
    link: &str,
    login: &str,
    (first, second): (usize, usize),
) -> anyhow::Result<(StatusCode, String, String, Option<String>)> {
    let sign_in = step(setup, agent, first, link, "opening the link").await?;
    anyhow::ensure!(sign_in.as_str().starts_with(setup.servers.issuer()), "the sign-in is at the issuer: {sign_in}");
    let back = agent.authorize(&sign_in, login, LOGIN_CALLBACK).await?;
    let (status, location, body) = agent.open(&Url::parse(&setup.on(second, back.as_str())?)?).await?;
    if status != StatusCode::FOUND {
        return Ok((status, body, back.to_string(), None));
    }
    let authorize = location.ok_or_else(|| anyhow::anyhow!("no Location after the sign-in"))?;
    let query = |name: &str| authorize.query_pairs().find(|(k, _)| k == name).map(|(_, v)| v.into_owned());
    anyhow::ensure!(query("code_challenge_method").as_deref() == Some("S256"), "PKCE S256: {authorize}");
    anyhow::ensure!(query("resource").as_deref() == Some(setup.servers.endpoint()), "RFC 8707: {authorize}");
    let done = agent.authorize(&authorize, login, CALLBACK).await?;
    anyhow::ensure!(done.query_pairs().any(|(k, _)| k == "iss"), "RFC 9207 iss: {done}");
    let (status, _, body) = agent.open(&Url::parse(&setup.on(first, done.as_str())?)?).await?;
    Ok((status, body, back.to_string(), Some(done.to_string())))
}

pub(crate) fn bearer(setup: &Setup, sub: &str) -> anyhow::Result<String> {
    let now = now_ms() / 1000;
    let claims = json!({"iss": setup.servers.issuer(), "sub": sub, "aud": RESOURCE, "iat": now, "exp": now + 300});
    let key = jsonwebtoken::EncodingKey::from_secret(HS256_SECRET.as_bytes());
    Ok(format!("Bearer {}", jsonwebtoken::encode(&jsonwebtoken::Header::default(), &claims, &key)?))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_user_connects_their_own_account_across_replicas_and_nobody_else_can() -> anyhow::Result<()> {
    let setup = Setup::start().await?;
    let logs = || {
        format!("{}\n{}\n{}", setup.servers.logs(), setup.cluster.replica(0).logs(), setup.cluster.replica(1).logs())
    };

    // Bob opens Alice's link: he signs in as himself and is refused; nothing is stored.
    let alices = setup.link("alice")?;
    let (status, page, _, _) = connect(&setup, &mut UserAgent::new()?, &alices, "bob", (0, 1)).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "{page}\n{}", logs());
    assert!(page.contains("someone other than"), "{page}");
    assert_eq!(setup.stored_token("alice").await?, None, "nothing stored for Alice");
    assert_eq!(setup.stored_token("bob").await?, None, "nor for Bob");
    // The link was spent by that attempt.
    assert_eq!(get(&setup.on(1, &alices)?).await?.0, StatusCode::GONE);

    // Each user connects with a fresh link: opened on one replica, back on the other.
    let mut alice_agent = UserAgent::new()?;
    let (status, page, login_back, done) =
        connect(&setup, &mut alice_agent, &setup.link("alice")?, "alice", (0, 1)).await?;
    assert_eq!(status, StatusCode::OK, "{page}\n{}", logs());
    assert!(page.contains("connected"), "{page}");
    let (status, page, _, _) = connect(&setup, &mut UserAgent::new()?, &setup.link("bob")?, "bob", (1, 0)).await?;
    assert_eq!(status, StatusCode::OK, "{page}\n{}", logs());

    // Each stored token is that user's, for the upstream.
    for sub in ["alice", "bob"] {
        let token = setup.stored_token(sub).await?.unwrap_or_else(|| panic!("{sub} has a connection"));
        assert_eq!(whoami(setup.servers.endpoint(), &token).await?, sub, "{sub}'s token is {sub}'s");
    }

    // Replayed: the sign-in's return and the authorization's return, on either replica.
    for i in [0, 1] {
        assert_eq!(get(&setup.on(i, &login_back)?).await?.0, StatusCode::GONE, "sign-in state replayed on {i}");
        let done = done.as_deref().expect("a callback");
        assert_eq!(get(&setup.on(i, done)?).await?.0, StatusCode::GONE, "authorization state replayed on {i}");
    }

    // Mallory opens his own link and signs in as himself, then forwards the next URL to
    // another browser instead of following it. The sign-in's return (login CSRF) is refused
    // in a browser that never opened a link; the authorization at the upstream's server,
    // approved there by Alice in her browser (whose cookie is of her own flow), is refused
    // when it comes back; nothing is stored for either.
    let mut mallory = UserAgent::new()?;
    let sign_in = step(&setup, &mut mallory, 0, &setup.link("mallory")?, "Mallory opens his link").await?;
    let back = mallory.authorize(&sign_in, "mallory", LOGIN_CALLBACK).await?;
    let (status, _, page) = UserAgent::new()?.open(&Url::parse(&setup.on(1, back.as_str())?)?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "a forwarded sign-in: {page}\n{}", logs());
    assert!(page.contains("another browser"), "{page}");
    let sign_in = step(&setup, &mut mallory, 1, &setup.link("mallory")?, "Mallory opens a new link").await?;
    let back = mallory.authorize(&sign_in, "mallory", LOGIN_CALLBACK).await?;
    let authorize = step(&setup, &mut mallory, 0, back.as_str(), "Mallory's sign-in comes back").await?;
    let done = alice_agent.authorize(&authorize, "alice", CALLBACK).await?;
    let (status, _, page) = alice_agent.open(&Url::parse(&setup.on(1, done.as_str())?)?).await?;
    assert_eq!(status, StatusCode::FORBIDDEN, "a forwarded authorization: {page}\n{}", logs());
    assert!(page.contains("another browser"), "{page}");
    assert_eq!(setup.stored_token("mallory").await?, None, "nothing stored for Mallory");
    let alices_token = setup.stored_token("alice").await?.expect("Alice's connection");
    assert_eq!(whoami(setup.servers.endpoint(), &alices_token).await?, "alice", "Alice's own, unchanged");

    // No token in clear in Redis.
    let dump = dump(setup.cluster_redis_port())?;
    assert!(!holds_a_jwt(&dump) && !dump.contains("access_token"), "a token in clear in the dump");
    assert!(dump.contains(setup.servers.issuer()), "the metadata stays readable");

    // An operator lists the connections (metadata, no token) and revokes Bob's.
    let admin = format!("http://{}", setup.cluster.replica(0).admin_addr().expect("an admin listener"));
    let cli = |args: &[&str]| -> anyhow::Result<Value> {
        let args = [&["admin", "--url", &admin, "credentials"], args].concat();
        let (status, out, err) = run_to_end(&args, &[("MCPGATE_ADMIN_TOKEN", ADMIN_TOKEN)])?;
        anyhow::ensure!(status.success(), "mcpgate {args:?}: {err}");
        Ok(serde_json::from_str(&out)?)
    };
    let listed = cli(&["list"])?;
    let subjects: Vec<&str> =
        listed["credentials"].as_array().into_iter().flatten().filter_map(|c| c["subject"].as_str()).collect();
    assert_eq!(subjects.len(), 2, "{listed}");
    assert!(subjects.contains(&"alice") && subjects.contains(&"bob"), "{listed}");
    assert!(!holds_a_jwt(&listed.to_string()), "no token listed: {listed}");
    let bobs = principal_key(setup.servers.issuer(), "bob");
    assert_eq!(cli(&["list", "--principal", &bobs])?["credentials"].as_array().map(Vec::len), Some(1));
    assert_eq!(cli(&["revoke", &bobs, UPSTREAM])?["revoked"], true);
    assert_eq!(setup.stored_token("bob").await?, None, "revoked");
    let (status, page, _, _) = connect(&setup, &mut UserAgent::new()?, &setup.link("bob")?, "bob", (1, 0)).await?;
    assert_eq!(status, StatusCode::OK, "Bob connects again: {page}");

    // Alice disconnects with her own bearer; Bob's connection stays.
    let http = reqwest::Client::new();
    let delete = |sub: &'static str| {
        let url = format!("{}/oauth/connections/{UPSTREAM}", setup.cluster.replica_url(1).trim_end_matches("/mcp"));
        let auth = bearer(&setup, sub);
        let http = http.clone();
        async move { anyhow::Ok(http.delete(url).header("authorization", auth?).send().await?.status()) }
    };
    assert_eq!(delete("alice").await?, StatusCode::NO_CONTENT);
    assert_eq!(delete("alice").await?, StatusCode::NOT_FOUND);
    assert_eq!(setup.stored_token("alice").await?, None);
    assert!(setup.stored_token("bob").await?.is_some(), "Bob's connection is his own");
    Ok(())
}
