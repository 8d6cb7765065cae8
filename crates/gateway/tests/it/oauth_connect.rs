//! Users' connections to `auth = "oauth"` upstreams, in-process: the settings they need
//! (validated with errors naming the setting) and the browser routes' refusals — links and
//! states that do not open, a callback without state, disconnecting without a bearer or
//! without a connection — each with its status and a page that quotes nothing it was sent.

use axum::http::{Method, StatusCode};

use mcpgate::Config;
use mcpgate::config::{AuthMode, Secret, load_from_str};
use mcpgate_upstream::UpstreamConfig;

use crate::support::{AUD, Req, app, claims, hs, hs256_config};

/// An `oauth` upstream on a closed loopback port (the routes under test never reach it).
fn oauth_upstream() -> UpstreamConfig {
    let mut u = UpstreamConfig::http("files", "http://127.0.0.1:9/mcp");
    u.auth = mcpgate_upstream::config::UpstreamAuth::Oauth;
    u
}

/// JWT auth, an `oauth` upstream, a loopback public URL and a browser-login client.
fn oauth_config() -> Config {
    let mut c = hs256_config();
    c.toolset = vec!["demo".to_owned()];
    c.upstream = vec![oauth_upstream()];
    c.federation.startup_wait_secs = 1;
    c.server.public_url = Some("http://127.0.0.1:8080".to_owned());
    c.auth.browser_login.client_id = Some("mcpgate".to_owned());
    c.auth.browser_login.client_secret = Some(Secret::new("login-s3cret"));
    c
}

fn error_of(c: &Config) -> String {
    c.validate().expect_err("invalid").to_string()
}

#[test]
fn oauth_upstreams_need_a_public_url_a_login_client_or_an_explicit_opt_out_and_callers() {
    assert!(oauth_config().validate().is_ok());

    let mut c = oauth_config();
    c.server.public_url = None;
    assert!(error_of(&c).contains("server.public_url"), "{}", error_of(&c));

    for bad in ["http://mcp.example.com", "https://mcp.example.com/?x=1", "mcp.example.com", "https://u@h.example"] {
        let mut c = oauth_config();
        c.server.public_url = Some(bad.to_owned());
        assert!(error_of(&c).contains("server.public_url"), "{bad}: {}", error_of(&c));
    }
    let mut c = oauth_config();
    c.server.public_url = Some("https://mcp.example.com/gateway".to_owned());
    assert!(c.validate().is_ok(), "https with a path");

    let mut c = oauth_config();
    c.auth.browser_login.client_id = None;
    c.auth.browser_login.client_secret = None;
    let e = error_of(&c);
    assert!(e.contains("auth.browser_login.client_id") && e.contains("verify_user"), "{e}");
    c.auth.browser_login.verify_user = false;
    assert!(c.validate().is_ok(), "the explicit opt-out");

    let mut c = oauth_config();
    c.auth.browser_login.scopes = vec!["profile".to_owned()];
    assert!(error_of(&c).contains("auth.browser_login.scopes"));

    let mut c = oauth_config();
    c.auth = Default::default();
    c.auth.mode = AuthMode::None;
    assert!(error_of(&c).contains("auth.mode"), "{}", error_of(&c));
}

#[test]
fn browser_login_loads_from_toml_and_its_secret_is_never_shown() {
    let text = "[server]\npublic_url = \"https://mcp.example.com\"\n[auth.browser_login]\nclient_id = \"gw\"\n\
                client_secret = \"login-s3cret-value\"\nscopes = [\"openid\", \"profile\"]\n";
    let c = load_from_str(text).expect("loads");
    assert_eq!(c.server.public_url.as_deref(), Some("https://mcp.example.com"));
    assert_eq!(c.auth.browser_login.client_id.as_deref(), Some("gw"));
    assert!(c.auth.browser_login.verify_user, "on by default");
    assert!(!format!("{c:?}").contains("login-s3cret-value"));
    let defaults = Config::default();
    assert_eq!(defaults.auth.browser_login.scopes, ["openid"]);
}

#[tokio::test]
async fn links_and_states_that_do_not_open_are_refused_with_a_page_that_quotes_nothing() {
    let app = app(oauth_config()).await;
    let forged = "v1.k.QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUE";
    for (path, status) in [
        (format!("/oauth/connect/{forged}"), StatusCode::BAD_REQUEST),
        ("/oauth/connect/not-sealed-at-all".to_owned(), StatusCode::BAD_REQUEST),
        (format!("/oauth/callback?code=c0de&state={forged}"), StatusCode::BAD_REQUEST),
        ("/oauth/callback?code=c0de".to_owned(), StatusCode::BAD_REQUEST),
        (format!("/oauth/callback/files?code=c0de&state={forged}"), StatusCode::BAD_REQUEST),
        ("/oauth/callback/files/0123abcd?code=c0de".to_owned(), StatusCode::BAD_REQUEST),
        (format!("/oauth/login/callback?code=c0de&state={forged}"), StatusCode::BAD_REQUEST),
        ("/oauth/login/callback?error=access_denied".to_owned(), StatusCode::FORBIDDEN),
    ] {
        let resp = Req::get(&path).send(&app).await;
        assert_eq!(resp.status, status, "{path}");
        let body = String::from_utf8_lossy(&resp.body);
        assert!(body.contains("<html>") && !body.contains("c0de") && !body.contains(forged), "{path}: {body}");
        assert_eq!(resp.header("cache-control"), Some("no-store"), "{path}");
    }
}

#[tokio::test]
async fn the_retired_single_callback_says_so_and_uses_nothing_it_was_sent() {
    let app = app(oauth_config()).await;
    let resp = Req::get("/oauth/callback?code=c0de&state=v1.k.AAAA").send(&app).await;
    assert_eq!(resp.status, StatusCode::BAD_REQUEST);
    let body = String::from_utf8_lossy(&resp.body);
    assert!(body.contains("no longer used") && !body.contains("c0de"), "{body}");
}

#[tokio::test]
async fn disconnecting_needs_the_callers_own_bearer_and_a_connection() {
    let app = app(oauth_config()).await;
    let resp = Req::get("/oauth/connections/files").method(Method::DELETE).send(&app).await;
    assert_eq!(resp.status, StatusCode::UNAUTHORIZED);
    assert!(resp.header("www-authenticate").is_some_and(|h| h.starts_with("Bearer")), "{:?}", resp.headers);

    let bearer = format!("Bearer {}", hs(&claims("alice")));
    for upstream in ["files", "unknown"] {
        let resp = Req::get(&format!("/oauth/connections/{upstream}"))
            .method(Method::DELETE)
            .header("authorization", &bearer)
            .send(&app)
            .await;
        assert_eq!(resp.status, StatusCode::NOT_FOUND, "{upstream}: nothing to disconnect");
    }
}

#[tokio::test]
async fn the_client_metadata_document_names_the_gateways_callback() {
    let mut c = oauth_config();
    c.server.public_url = Some("http://127.0.0.1:8080/gw/".to_owned());
    // An upstream with a client registered beforehand has its own redirect URI, registered by
    // the operator: the document, which any server accepts, does not list it.
    let mut pre = oauth_upstream();
    pre.name = "mail".to_owned();
    pre.oauth = Some(mcpgate_upstream::config::OAuthConfig {
        client_id: Some("gw".to_owned()),
        issuer: Some("https://as.example".to_owned()),
        ..Default::default()
    });
    c.upstream.push(pre);
    let app = app(c).await;
    let resp = Req::get("/oauth/client-metadata.json").send(&app).await;
    assert_eq!(resp.status, StatusCode::OK);
    let doc = resp.json();
    assert_eq!(doc["client_id"], "http://127.0.0.1:8080/gw/oauth/client-metadata.json");
    assert_eq!(doc["redirect_uris"], serde_json::json!(["http://127.0.0.1:8080/gw/oauth/callback/files"]));
    assert_eq!(doc["token_endpoint_auth_method"], "none");
}

#[tokio::test]
async fn without_an_oauth_upstream_there_are_no_oauth_routes() {
    let mut c = hs256_config();
    c.auth.resource = Some(AUD.to_owned());
    let app = app(c).await;
    let resp = Req::get("/oauth/client-metadata.json").send(&app).await;
    assert_eq!(resp.status, StatusCode::NOT_FOUND);
}
