//! Tests of `[[upstream]]` tables: expansion, validation, and secrets kept out of errors.

use super::*;

fn env(var: &str) -> Option<String> {
    (var == "TOKEN").then(|| "s3cret".to_owned())
}

#[test]
fn debug_shows_no_secret_values() {
    let mut u = UpstreamConfig::http("search", "https://user:pw@search.example/mcp?key=k");
    u.headers.insert("Authorization".to_owned(), "Bearer ${TOKEN}".to_owned());
    u.expand(&env).unwrap();
    let shown = format!("{u:?}");
    assert!(!shown.contains("s3cret") && !shown.contains("pw") && !shown.contains("key=k"), "{shown}");
    assert!(shown.contains("Authorization"));
}

#[test]
fn validation_names_the_key() {
    let mut u = UpstreamConfig::stdio("Files", "npx", &[]);
    assert!(matches!(u.validate(), Err(UpstreamError::Config { key, .. }) if key == "name"));
    u.name = "files".to_owned();
    u.url = Some("http://x".to_owned());
    assert!(matches!(u.validate(), Err(UpstreamError::Config { key, .. }) if key == "url"));
    let mut h = UpstreamConfig::http("web", "ftp://nope");
    assert!(matches!(h.validate(), Err(UpstreamError::Config { key, .. }) if key == "url"));
    h.url = Some("https://search.example/mcp".to_owned());
    h.headers.insert("Mcp-Session-Id".to_owned(), "x".to_owned());
    assert!(matches!(h.validate(), Err(UpstreamError::Config { key, .. }) if key == "headers.Mcp-Session-Id"));
}

fn exchanging(url: &str) -> UpstreamConfig {
    let mut u = UpstreamConfig::http("search", "https://search.example/mcp");
    u.token_exchange = Some(TokenExchangeConfig::new(url, "gateway", "${TOKEN}", "search"));
    u
}

fn key_of(u: &UpstreamConfig) -> Option<String> {
    match u.validate() {
        Err(UpstreamError::Config { key, .. }) => Some(key),
        _ => None,
    }
}

#[test]
fn token_exchange_is_validated() {
    let mut u = exchanging("https://auth.example/token");
    u.expand(&env).unwrap();
    assert_eq!(key_of(&u), None);
    assert_eq!(u.token_exchange.as_ref().map(|t| t.client_secret.as_str()), Some("s3cret"));
    for url in ["http://127.0.0.1:8080/token", "http://localhost/token", "http://[::1]:9/t"] {
        assert_eq!(key_of(&exchanging(url)), None, "{url}");
    }
    for url in ["http://auth.example/token", "ftp://auth.example/", "https://u:p@auth.example/", "token"] {
        assert_eq!(key_of(&exchanging(url)).as_deref(), Some("token_exchange.token_url"), "{url}");
    }
    // Not for stdio (nor sse): no per-request credentials there.
    let mut stdio = UpstreamConfig::stdio("files", "npx", &[]);
    stdio.token_exchange = exchanging("https://auth.example/token").token_exchange;
    assert_eq!(key_of(&stdio).as_deref(), Some("token_exchange"));
    // An audience or a resource, or the token is not bound to this upstream.
    let mut u = exchanging("https://auth.example/token");
    let exchange = u.token_exchange.as_mut().unwrap();
    exchange.audience = None;
    assert_eq!(key_of(&u).as_deref(), Some("token_exchange.audience"));
    u.token_exchange.as_mut().unwrap().resource = Some("https://search.example/mcp".to_owned());
    assert_eq!(key_of(&u), None);
    u.token_exchange.as_mut().unwrap().resource = Some("search".to_owned());
    assert_eq!(key_of(&u).as_deref(), Some("token_exchange.resource"));
    // A static Authorization header would be ambiguous.
    let mut u = exchanging("https://auth.example/token");
    u.headers.insert("authorization".to_owned(), "Bearer x".to_owned());
    assert_eq!(key_of(&u).as_deref(), Some("headers.Authorization"));
    let mut u = exchanging("https://auth.example/token");
    u.token_exchange.as_mut().unwrap().cache_max_entries = 0;
    assert_eq!(key_of(&u).as_deref(), Some("token_exchange.cache_max_entries"));
    u.token_exchange.as_mut().unwrap().cache_max_entries = 5;
    u.token_exchange.as_mut().unwrap().timeout_secs = Some(0);
    assert_eq!(key_of(&u).as_deref(), Some("token_exchange.timeout_secs"));
}

#[test]
fn token_exchange_reads_from_a_table_and_hides_its_secret() {
    let table = serde_json::json!({
        "name": "search", "transport": "http", "url": "https://search.example/mcp",
        "token_exchange": {
            "token_url": "https://auth.example/token", "client_id": "gateway", "client_secret": "${TOKEN}",
            "resource": "https://search.example/mcp", "scope": "search.read",
        },
    });
    let mut u = UpstreamConfig::deserialize_from(table).unwrap();
    u.expand(&env).unwrap();
    u.validate().unwrap();
    let exchange = u.token_exchange.as_ref().unwrap();
    assert_eq!(exchange.subject_token_type, ACCESS_TOKEN_TYPE);
    assert_eq!(exchange.requested_token_type, ACCESS_TOKEN_TYPE);
    assert_eq!((exchange.cache_max_entries, exchange.timeout(120)), (10_000, Duration::from_secs(10)));
    assert_eq!(exchange.timeout(3), Duration::from_secs(3));
    let shown = format!("{u:?}");
    assert!(shown.contains("token_exchange") && !shown.contains("s3cret"), "{shown}");
    let table = serde_json::json!({"name": "x", "token_exchange": {
        "token_url": "https://a/", "client_id": "c", "client_secret": "s", "nope": 1}});
    let err = UpstreamConfig::deserialize_from(table).unwrap_err();
    assert!(err.contains("nope"), "{err}");
}

#[test]
fn include_and_exclude() {
    let mut u = UpstreamConfig::http("web", "https://search.example/mcp");
    u.tools.include = vec!["web_*".to_owned()];
    u.tools.exclude = vec!["web_admin".to_owned()];
    assert!(u.exposes("web_fetch"));
    assert!(!u.exposes("web_admin"));
    assert!(!u.exposes("other"));
}

fn oauth(url: &str) -> UpstreamConfig {
    let mut u = UpstreamConfig::http("tracker", url);
    u.auth = UpstreamAuth::Oauth;
    u
}

#[test]
fn oauth_upstreams_are_validated() {
    assert_eq!(key_of(&oauth("https://tracker.example/mcp")), None);
    let mut stdio = UpstreamConfig::stdio("tracker", "npx", &[]);
    stdio.auth = UpstreamAuth::Oauth;
    assert_eq!(key_of(&stdio).as_deref(), Some("auth"));
    let mut both = oauth("https://tracker.example/mcp");
    both.token_exchange = Some(TokenExchangeConfig::new("https://as.example/token", "g", "s", "a"));
    assert_eq!(key_of(&both).as_deref(), Some("token_exchange"));
    let mut header = oauth("https://tracker.example/mcp");
    header.headers.insert("authorization".to_owned(), "Bearer x".to_owned());
    assert_eq!(key_of(&header).as_deref(), Some("headers.Authorization"));
    let mut secret_alone = oauth("https://tracker.example/mcp");
    secret_alone.oauth = Some(OAuthConfig { client_secret: Some("s".to_owned()), ..OAuthConfig::default() });
    assert_eq!(key_of(&secret_alone).as_deref(), Some("oauth.client_secret"));
    let mut pinned_oauth = oauth("https://tracker.example/mcp");
    pinned_oauth.pin = crate::config::PinMode::FirstSeen;
    assert_eq!(key_of(&pinned_oauth).as_deref(), Some("pin"), "each caller's own tools cannot be pinned");
    let mut scope = oauth("https://tracker.example/mcp");
    scope.oauth = Some(OAuthConfig { scopes: vec!["read write".to_owned()], ..OAuthConfig::default() });
    assert_eq!(key_of(&scope).as_deref(), Some("oauth.scopes"));
    let mut no_issuer = oauth("https://tracker.example/mcp");
    no_issuer.oauth = Some(OAuthConfig {
        client_id: Some("gw".to_owned()),
        client_secret: Some("s".to_owned()),
        ..OAuthConfig::default()
    });
    assert_eq!(key_of(&no_issuer).as_deref(), Some("oauth.issuer"), "a secret needs the server it belongs to");
    for (issuer, valid) in [
        ("https://login.example", true),
        ("http://127.0.0.1:4000/tenant", true),
        ("http://login.example", false),
        ("https://login.example/?t=1", false),
        ("login.example", false),
    ] {
        let mut pinned = no_issuer.clone();
        if let Some(o) = pinned.oauth.as_mut() {
            o.issuer = Some(issuer.to_owned());
        }
        assert_eq!(key_of(&pinned).as_deref(), (!valid).then_some("oauth.issuer"), "{issuer}");
    }
    let mut bare_id = oauth("https://tracker.example/mcp");
    bare_id.oauth = Some(OAuthConfig { client_id: Some("gw".to_owned()), ..OAuthConfig::default() });
    assert_eq!(key_of(&bare_id), None, "a public client needs no issuer");
    let mut table_alone = UpstreamConfig::http("tracker", "https://tracker.example/mcp");
    table_alone.oauth = Some(OAuthConfig::default());
    assert_eq!(key_of(&table_alone).as_deref(), Some("oauth"));
}

#[test]
fn oauth_secrets_expand_and_never_show() {
    let mut u = oauth("https://tracker.example/mcp");
    u.oauth = Some(OAuthConfig {
        client_id: Some("gateway".to_owned()),
        client_secret: Some("${TOKEN}".to_owned()),
        ..OAuthConfig::default()
    });
    u.expand(&env).unwrap();
    assert_eq!(u.oauth().client_secret.as_deref(), Some("s3cret"));
    let shown = format!("{u:?}");
    assert!(!shown.contains("s3cret") && shown.contains("<set>"), "{shown}");
    let parsed: UpstreamConfig = serde_json::from_value(serde_json::json!({
        "name": "tracker", "transport": "http", "url": "https://t.example/mcp",
        "auth": "oauth", "oauth": { "scopes": ["read"] },
    }))
    .unwrap();
    assert!(parsed.is_oauth() && parsed.oauth().scopes == ["read"]);
}

#[test]
fn overrides_are_validated_naming_the_upstream_and_key() {
    let renamed = |name: &str| ToolOverride { rename: Some(name.to_owned()), ..ToolOverride::default() };
    let mut u = UpstreamConfig::stdio("files", "npx", &[]);
    u.overrides.insert("read".to_owned(), renamed("bad name"));
    assert!(matches!(u.validate(), Err(UpstreamError::Config { key, .. }) if key == "overrides.read.rename"));
    u.overrides.insert("read".to_owned(), renamed("read_file"));
    u.overrides.insert("cat".to_owned(), renamed("read_file"));
    assert!(matches!(u.validate(), Err(UpstreamError::Config { key, .. }) if key.ends_with(".rename")));
    u.overrides.remove("cat");
    assert!(u.validate().is_ok());
    assert_eq!((u.exposed_name("read", "_"), u.exposed_name("write", "_")), ("read_file".into(), "files_write".into()));
    // Across upstreams: one exposed name, two tools.
    let mut other = UpstreamConfig::stdio("disk", "npx", &[]);
    other.overrides.insert("cat".to_owned(), renamed("read_file"));
    // Inside another upstream's names: refused, whichever upstream it is.
    let mut squatter = UpstreamConfig::stdio("third", "npx", &[]);
    squatter.overrides.insert("ls".to_owned(), renamed("files_write"));
    let squat = super::validate_renames(&[u.clone(), squatter], "_").expect_err("in files_'s names");
    assert!(matches!(&squat, UpstreamError::Config { upstream, .. } if upstream == "third"), "{squat}");
    let mut own = UpstreamConfig::stdio("own", "npx", &[]);
    own.overrides.insert("ls".to_owned(), renamed("own_list"));
    assert!(super::validate_renames(&[own.clone()], "_").is_err(), "its own prefix, another tool's name");
    own.overrides.insert("ls".to_owned(), renamed("own_ls"));
    assert!(super::validate_renames(&[own], "_").is_ok(), "the name it would have anyway");
    assert!(super::validate_renames(&[u.clone(), other.clone()], "_").is_ok());
    let both = validate_all(&[u, other]).expect_err("two renames to one name");
    assert!(
        matches!(&both, UpstreamError::Config { upstream, key, problem, source: None }
            if upstream == "disk" && key == "overrides.cat.rename" && problem.contains("files")),
        "{both}"
    );
}

#[test]
fn unknown_override_keys_are_refused() {
    let table = serde_json::json!({"name": "files", "command": "npx", "overrides": {"read": {"hiden": {"a": 1}}}});
    let refused = UpstreamConfig::deserialize_from(table).expect_err("unknown key");
    assert!(refused.contains("hiden"), "{refused}");
}
