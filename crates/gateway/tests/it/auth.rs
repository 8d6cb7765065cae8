//! JWT authentication with real signed tokens (HS256, ES256, RS256), JWKS from a file and
//! from a URL with rotation, scopes, protected resource metadata, and principal isolation.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::{Value, json};

use mcpgate::Config;

use crate::support::{Req, app, assert_error, assert_error_without_id};

use crate::support::{AUD, ISS, SECRET, claims, hs};

const METADATA: &str = "https://mcp.example.com/.well-known/oauth-protected-resource/mcp";

fn fixture(name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "keys", name].iter().collect();
    path.display().to_string()
}

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(fixture(name)).expect("fixture key")
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs()
}

fn jwt_config() -> Config {
    let mut c = crate::support::hs256_config();
    c.auth.scopes_supported = vec!["mcp:tools".to_owned()];
    c.auth.jwt.algorithms = ["HS256", "ES256", "RS256", "EdDSA"].map(str::to_owned).to_vec();
    c.auth.jwt.public_key_files = vec![
        format!("es-1={}", fixture("es256-public.pem")),
        fixture("rs256-public.pem"),
        fixture("ed25519-public.pem"),
    ];
    c
}

fn sign(alg: Algorithm, kid: Option<&str>, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = kid.map(str::to_owned);
    encode(&header, claims, key).expect("signs")
}

fn es(kid: Option<&str>, key_file: &str, claims: &Value) -> String {
    sign(Algorithm::ES256, kid, &EncodingKey::from_ec_pem(&pem(key_file)).expect("ec key"), claims)
}

async fn call(app: &Router, token: Option<&str>) -> crate::support::Resp {
    let req = Req::modern("tools/list", json!({}));
    let req = match token {
        Some(t) => req.header("authorization", &format!("Bearer {t}")),
        None => req,
    };
    req.send(app).await
}

#[track_caller]
fn assert_unauthorized(resp: &crate::support::Resp, invalid_token: bool) {
    assert_error_without_id(resp, 401, -32600);
    let challenge = resp.header("www-authenticate").expect("challenge");
    assert!(challenge.starts_with("Bearer "), "{challenge}");
    assert!(challenge.contains(&format!("resource_metadata=\"{METADATA}\"")), "{challenge}");
    assert_eq!(challenge.contains("error=\"invalid_token\""), invalid_token, "{challenge}");
}

#[tokio::test]
async fn valid_tokens_of_every_key_type_are_accepted() {
    let app = app(jwt_config()).await;
    assert!(call(&app, Some(&hs(&claims("alice")))).await.result()["tools"].is_array());
    assert!(
        call(&app, Some(&es(Some("es-1"), "es256-private.pem", &claims("alice")))).await.result()["tools"].is_array()
    );
    let rs = sign(
        Algorithm::RS256,
        None,
        &EncodingKey::from_rsa_pem(&pem("rs256-private.pem")).expect("rsa"),
        &claims("alice"),
    );
    assert!(call(&app, Some(&rs)).await.result()["tools"].is_array());
    let ed = sign(
        Algorithm::EdDSA,
        None,
        &EncodingKey::from_ed_pem(&pem("ed25519-private.pem")).expect("ed25519"),
        &claims("alice"),
    );
    assert!(call(&app, Some(&ed)).await.result()["tools"].is_array());
    let lower = Req::modern("tools/list", json!({}))
        .header("authorization", &format!("bearer {}", hs(&claims("a"))))
        .send(&app)
        .await;
    assert!(lower.result()["tools"].is_array(), "the scheme is case-insensitive");
}

#[tokio::test]
async fn missing_and_malformed_credentials_are_401() {
    let app = app(jwt_config()).await;
    assert_unauthorized(&call(&app, None).await, false);
    let basic = Req::modern("tools/list", json!({})).header("authorization", "Basic YTpi").send(&app).await;
    assert_error_without_id(&basic, 401, -32600);
    assert_unauthorized(&call(&app, Some("not.a.jwt")).await, true);
}

#[tokio::test]
async fn invalid_tokens_are_401_invalid_token() {
    let app = app(jwt_config()).await;
    let mut expired = claims("alice");
    expired["exp"] = json!(now() - 3600);
    let mut wrong_aud = claims("alice");
    wrong_aud["aud"] = json!("https://other.example.com/mcp");
    let mut wrong_iss = claims("alice");
    wrong_iss["iss"] = json!("https://evil.example.com");
    let mut not_yet = claims("alice");
    not_yet["nbf"] = json!(now() + 3600);
    let mut no_sub = claims("alice");
    no_sub.as_object_mut().expect("object").remove("sub");
    let mut no_aud = claims("alice");
    no_aud.as_object_mut().expect("object").remove("aud");
    let mut empty_sub = claims("alice");
    empty_sub["sub"] = json!("");
    let mut blank_sub = claims("alice");
    blank_sub["sub"] = json!("  ");
    for (what, token) in [
        ("expired", hs(&expired)),
        ("wrong audience", hs(&wrong_aud)),
        ("wrong issuer", hs(&wrong_iss)),
        ("not yet valid", hs(&not_yet)),
        ("no subject", hs(&no_sub)),
        ("no audience", hs(&no_aud)),
        ("empty subject", hs(&empty_sub)),
        ("blank subject", hs(&blank_sub)),
        (
            "bad signature",
            sign(
                Algorithm::HS256,
                None,
                &EncodingKey::from_secret(b"another-secret-of-at-least-32-bytes!!"),
                &claims("a"),
            ),
        ),
        ("foreign EC key under our kid", es(Some("es-1"), "es256-other-private.pem", &claims("a"))),
        (
            "algorithm not allowed",
            sign(Algorithm::HS384, None, &EncodingKey::from_secret(SECRET.as_bytes()), &claims("a")),
        ),
    ] {
        let resp = call(&app, Some(&token)).await;
        assert_eq!(resp.status.as_u16(), 401, "{what}");
        assert_unauthorized(&resp, true);
    }
    let expired = call(&app, Some(&hs(&expired))).await;
    assert!(expired.header("www-authenticate").expect("challenge").contains("token expired"));
    let empty = call(&app, Some(&hs(&empty_sub))).await;
    assert!(empty.header("www-authenticate").expect("challenge").contains("subject is empty"));
}

#[tokio::test]
async fn alg_none_and_key_confusion_are_refused() {
    use base64::Engine as _;
    let b64 = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    let app = app(jwt_config()).await;
    let none = format!("{}.{}.", b64(&json!({"alg": "none", "typ": "JWT"})), b64(&claims("alice")));
    assert_unauthorized(&call(&app, Some(&none)).await, true);
    // An HS256 token keyed with our RSA public key must not verify (classic confusion attack).
    let confused = sign(Algorithm::HS256, None, &EncodingKey::from_secret(&pem("rs256-public.pem")), &claims("alice"));
    assert_unauthorized(&call(&app, Some(&confused)).await, true);
}

#[tokio::test]
async fn required_scopes_are_enforced_with_403() {
    let mut c = jwt_config();
    c.auth.required_scopes = vec!["mcp:tools".to_owned()];
    let app = app(c).await;
    let resp = call(&app, Some(&hs(&claims("alice")))).await;
    assert_error_without_id(&resp, 403, -32600);
    let challenge = resp.header("www-authenticate").expect("challenge");
    assert!(
        challenge.contains("error=\"insufficient_scope\"") && challenge.contains("scope=\"mcp:tools\""),
        "{challenge}"
    );
    let mut scoped = claims("alice");
    scoped["scope"] = json!("openid mcp:tools");
    assert!(call(&app, Some(&hs(&scoped))).await.result()["tools"].is_array());
}

#[tokio::test]
async fn protected_resource_metadata_at_root_and_path_inserted() {
    let app = app(jwt_config()).await;
    for path in ["/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"] {
        let resp = Req::get(path).send(&app).await;
        let doc = resp.json();
        assert_eq!(resp.status.as_u16(), 200, "{path}");
        assert_eq!(doc["resource"], AUD);
        assert_eq!(doc["authorization_servers"], json!([ISS]));
        assert_eq!(doc["scopes_supported"], json!(["mcp:tools"]));
    }
}

#[tokio::test]
async fn jwks_file_keys_by_kid() {
    let mut c = jwt_config();
    c.auth.jwt.public_key_files.clear();
    c.auth.jwt.hs256_secrets.clear();
    c.auth.jwt.algorithms = vec!["ES256".to_owned()];
    c.auth.jwt.jwks_file = Some(fixture("jwks-es256.json"));
    let app = app(c).await;
    assert!(call(&app, Some(&es(Some("es-1"), "es256-private.pem", &claims("a")))).await.result()["tools"].is_array());
    assert_unauthorized(&call(&app, Some(&es(Some("es-2"), "es256-other-private.pem", &claims("a")))).await, true);
}

#[tokio::test]
async fn jwks_url_is_fetched_and_refreshed_on_an_unknown_kid() {
    let served = Arc::new(Mutex::new(std::fs::read_to_string(fixture("jwks-es256.json")).expect("jwks")));
    let fetches = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (doc, count) = (served.clone(), fetches.clone());
    let jwks = Router::new().route(
        "/jwks.json",
        axum::routing::get(move || {
            let doc = doc.clone();
            let count = count.clone();
            async move {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let body = doc.lock().expect("lock").clone();
                ([("content-type", "application/json")], body)
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move { axum::serve(listener, jwks).await });

    let mut c = jwt_config();
    c.auth.jwt.public_key_files.clear();
    c.auth.jwt.hs256_secrets.clear();
    c.auth.jwt.algorithms = vec!["ES256".to_owned()];
    c.auth.jwt.jwks_url = Some(format!("http://{addr}/jwks.json"));
    c.auth.jwt.jwks_refresh_min_secs = 1;
    let app = app(c).await;
    assert!(call(&app, Some(&es(Some("es-1"), "es256-private.pem", &claims("a")))).await.result()["tools"].is_array());
    assert!(call(&app, Some(&es(Some("es-1"), "es256-private.pem", &claims("a")))).await.result()["tools"].is_array());
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 1, "cached between requests");

    // The issuer rotates to a new key; once the minimum refresh interval has passed, a token
    // naming the new key triggers one refresh.
    *served.lock().expect("lock") = std::fs::read_to_string(fixture("jwks-es256-other.json")).expect("jwks");
    // The interval is measured on tokio's clock: moved on past it rather than waited for, and
    // let run again for the real HTTP fetch that follows.
    tokio::time::pause();
    tokio::time::advance(std::time::Duration::from_millis(1100)).await;
    tokio::time::resume();
    assert!(
        call(&app, Some(&es(Some("es-2"), "es256-other-private.pem", &claims("a")))).await.result()["tools"].is_array()
    );
    assert_eq!(fetches.load(std::sync::atomic::Ordering::SeqCst), 2);
    server.abort();
}

/// A JWKS URL that redirects to a plain-HTTP URL: the redirect is not followed, so no key is
/// learnt from it and the token is refused.
#[tokio::test]
async fn jwks_redirects_to_plain_http_are_not_followed() {
    let doc = std::fs::read_to_string(fixture("jwks-es256.json")).expect("jwks");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let followed = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = followed.clone();
    let jwks = Router::new()
        .route(
            "/jwks.json",
            axum::routing::get(move || async move {
                (axum::http::StatusCode::FOUND, [("location", format!("http://{addr}/keys.json"))])
            }),
        )
        .route(
            "/keys.json",
            axum::routing::get(move || {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let doc = doc.clone();
                async move { ([("content-type", "application/json")], doc) }
            }),
        );
    let server = tokio::spawn(async move { axum::serve(listener, jwks).await });

    let mut c = jwt_config();
    c.auth.jwt.public_key_files.clear();
    c.auth.jwt.hs256_secrets.clear();
    c.auth.jwt.algorithms = vec!["ES256".to_owned()];
    c.auth.jwt.jwks_url = Some(format!("http://{addr}/jwks.json"));
    let app = app(c).await;
    assert_unauthorized(&call(&app, Some(&es(Some("es-1"), "es256-private.pem", &claims("a")))).await, true);
    assert_eq!(followed.load(std::sync::atomic::Ordering::SeqCst), 0, "the redirect was followed");
    server.abort();
}

#[tokio::test]
async fn sessions_belong_to_the_principal_that_opened_them() {
    let app = app(jwt_config()).await;
    let alice = format!("Bearer {}", hs(&claims("alice")));
    let bob = format!("Bearer {}", hs(&claims("bob")));
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}});
    let resp = Req::legacy("initialize", params, None).header("authorization", &alice).send(&app).await;
    let session = resp.header("mcp-session-id").expect("session").to_owned();
    let mine = Req::legacy("tools/list", json!({}), Some(&session)).header("authorization", &alice).send(&app).await;
    assert!(mine.result()["tools"].is_array());
    let theirs = Req::legacy("tools/list", json!({}), Some(&session)).header("authorization", &bob).send(&app).await;
    assert_error(&theirs, 404, -32600);
}

#[tokio::test]
async fn lists_are_private_behind_auth() {
    let app = app(jwt_config()).await;
    let result = call(&app, Some(&hs(&claims("alice")))).await.result();
    assert_eq!(result["cacheScope"], "private");
}

#[tokio::test]
async fn static_keys_do_not_shadow_the_jwks() {
    // An unnamed static key of the same family must not stop a JWKS key from verifying.
    let mut c = jwt_config();
    c.auth.jwt.hs256_secrets.clear();
    c.auth.jwt.algorithms = vec!["ES256".to_owned()];
    c.auth.jwt.public_key_files = vec![fixture("es256-public.pem")];
    c.auth.jwt.jwks_file = Some(fixture("jwks-es256-other.json"));
    let app = app(c).await;
    // Signed by the JWKS key: the unnamed static key fails first, then the JWKS key verifies.
    assert!(
        call(&app, Some(&es(Some("es-2"), "es256-other-private.pem", &claims("a")))).await.result()["tools"].is_array()
    );
    assert!(call(&app, Some(&es(None, "es256-private.pem", &claims("a")))).await.result()["tools"].is_array());
    // Signed by the JWKS key but naming a kid nobody publishes: no key verifies it.
    assert_unauthorized(&call(&app, Some(&es(Some("es-1"), "es256-other-private.pem", &claims("a")))).await, true);
}

#[tokio::test]
async fn scopes_as_strings_or_arrays() {
    let mut c = jwt_config();
    c.auth.required_scopes = vec!["mcp:tools".to_owned()];
    let app = app(c).await;
    for (claim, value) in [
        ("scope", json!("a mcp:tools")),
        ("scope", json!(["a", "mcp:tools"])),
        ("scp", json!("mcp:tools")),
        ("scp", json!(["mcp:tools"])),
    ] {
        let mut claims = claims("alice");
        claims[claim] = value.clone();
        let resp = call(&app, Some(&hs(&claims))).await;
        assert_eq!(resp.status.as_u16(), 200, "{claim}={value}: {}", String::from_utf8_lossy(&resp.body));
    }
}

#[tokio::test]
async fn nothing_is_publicly_cacheable_behind_auth() {
    let app = app(jwt_config()).await;
    let token = format!("Bearer {}", hs(&claims("alice")));
    for (method, params) in [
        ("server/discover", json!({})),
        ("resources/read", json!({"uri": "test://static-text"})),
        ("prompts/list", json!({})),
    ] {
        let resp = Req::modern(method, params).header("authorization", &token).send(&app).await;
        assert_eq!(resp.result()["cacheScope"], "private", "{method}");
    }
}

#[tokio::test]
async fn tasks_belong_to_their_principal() {
    let app = app(jwt_config()).await;
    let alice = format!("Bearer {}", hs(&claims("alice")));
    let bob = format!("Bearer {}", hs(&claims("bob")));
    let ext = json!({"extensions": {"io.modelcontextprotocol/tasks": {}}});
    let created =
        Req::modern_with("tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 30}}), ext.clone())
            .header("authorization", &alice)
            .send(&app)
            .await
            .result();
    let id = created["taskId"].as_str().expect("id");
    let mine = Req::modern_with("tasks/get", json!({"taskId": id}), ext.clone())
        .header("authorization", &alice)
        .send(&app)
        .await;
    assert_eq!(mine.result()["taskId"], id);
    for method in ["tasks/get", "tasks/cancel"] {
        let theirs =
            Req::modern_with(method, json!({"taskId": id}), ext.clone()).header("authorization", &bob).send(&app).await;
        let json = assert_error(&theirs, 200, -32602);
        assert!(json["error"]["message"].as_str().expect("message").contains("not found"), "never 'forbidden': {json}");
    }
    // Bob's cancel did nothing.
    let still = Req::modern_with("tasks/get", json!({"taskId": id}), ext.clone())
        .header("authorization", &alice)
        .send(&app)
        .await;
    assert_eq!(still.result()["status"], "working");

    // Legacy tasks/list is offered behind authentication and lists only the caller's tasks.
    let params =
        json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}});
    let init = Req::legacy("initialize", params.clone(), None).header("authorization", &alice).send(&app).await;
    let session = init.header("mcp-session-id").expect("session").to_owned();
    assert!(init.result()["capabilities"]["tasks"]["list"].is_object());
    let listed =
        Req::legacy("tasks/list", json!({}), Some(&session)).header("authorization", &alice).send(&app).await.result();
    let ids: Vec<&str> =
        listed["tasks"].as_array().expect("tasks").iter().filter_map(|t| t["taskId"].as_str()).collect();
    assert_eq!(ids, [id]);
    let init = Req::legacy("initialize", params, None).header("authorization", &bob).send(&app).await;
    let bobs = init.header("mcp-session-id").expect("session").to_owned();
    let listed =
        Req::legacy("tasks/list", json!({}), Some(&bobs)).header("authorization", &bob).send(&app).await.result();
    assert_eq!(listed["tasks"], json!([]));
    let bad = Req::legacy("tasks/list", json!({"cursor": "garbage"}), Some(&bobs))
        .header("authorization", &bob)
        .send(&app)
        .await;
    assert_error(&bad, 200, -32602);
}
