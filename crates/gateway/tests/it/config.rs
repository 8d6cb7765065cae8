//! Configuration: layering (defaults → file → environment → flags), type and meaning
//! validation with errors that name the setting, and secrets that never leak.

use std::collections::HashMap;
use std::io::Write as _;

use mcpgate::config::settings::SETTINGS;
use mcpgate::config::{AuthMode, Cli, LogFormat, load, load_from_str};
use mcpgate::{Config, StartupError};

use crate::support::error_text;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
    move |k| map.get(k).cloned()
}

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().expect("temp file");
    f.write_all(text.as_bytes()).expect("write");
    f
}

#[test]
fn defaults_are_the_embedded_single_replica_setup() {
    let c = load(&Cli::default(), &env(&[])).expect("defaults are valid");
    assert_eq!(c.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.auth.mode, AuthMode::None);
    assert_eq!(c.toolset, ["demo"]);
    assert!(c.redis_url.is_none() && c.seal.keys.is_empty());
    assert_eq!(c.http.body_limit_bytes, 4 * 1024 * 1024);
}

#[test]
fn sources_layer_file_then_environment_then_flags() {
    let f = file(
        "listen = \"127.0.0.1:9001\"\ntoolset = \"conformance\"\n[log]\nformat = \"json\"\nlevel = \"debug\"\n[http]\nbody_limit_bytes = 10000\n",
    );
    let cli = Cli { config: Some(f.path().to_owned()), ..Cli::default() };
    let c = load(&cli, &env(&[])).expect("valid");
    assert_eq!(c.listen.port(), 9001);
    assert_eq!(c.toolset, ["conformance"], "a lone string is a one-element list");
    assert_eq!(c.log.format, LogFormat::Json);

    let c = load(
        &cli,
        &env(&[
            ("MCPGATE_LISTEN", "127.0.0.1:9002"),
            ("MCPGATE_TOOLSET", "demo, conformance"),
            ("MCPGATE_HTTP_BODY_LIMIT_BYTES", "20000"),
        ]),
    )
    .expect("valid");
    assert_eq!(c.listen.port(), 9002, "environment beats the file");
    assert_eq!(c.toolset, ["demo", "conformance"]);
    assert_eq!(c.http.body_limit_bytes, 20000);
    assert_eq!(c.log.level, "debug", "untouched file values stay");

    let cli = Cli { listen: Some("127.0.0.1:9003".to_owned()), toolset: Some("demo".to_owned()), ..cli };
    let c = load(&cli, &env(&[("MCPGATE_LISTEN", "127.0.0.1:9002")])).expect("valid");
    assert_eq!(c.listen.port(), 9003, "flags beat the environment");
    assert_eq!(c.toolset, ["demo"]);
}

/// A valid sealing key for multi-replica cases.
const KEY: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";

#[test]
fn errors_name_the_setting() {
    type Loader = Box<dyn Fn() -> Result<Config, StartupError>>;
    let cases: Vec<(Loader, &str)> = vec![
        (Box::new(|| load_from_str("[auth]\nmoode = \"jwt\"\n")), "auth.moode"),
        (Box::new(|| load_from_str("[http]\nbody_limit_bytes = \"big\"\n")), "http.body_limit_bytes"),
        (
            Box::new(|| load(&Cli::default(), &env(&[("MCPGATE_HTTP_BODY_LIMIT_BYTES", "-1")]))),
            "MCPGATE_HTTP_BODY_LIMIT_BYTES",
        ),
        (
            Box::new(|| load(&Cli::default(), &env(&[("MCPGATE_AUTH_ALLOW_ANONYMOUS_NON_LOOPBACK", "maybe")]))),
            "auth.allow_anonymous_non_loopback",
        ),
        (Box::new(|| load_from_str("toolset = [\"demo\", \"nope\"]\n")), "toolset"),
        (Box::new(|| load_from_str("listen = \"0.0.0.0:8080\"\n")), "auth.mode"),
        (Box::new(|| load_from_str("redis_url = \"redis://127.0.0.1:6379\"\n")), "seal.keys"),
        (Box::new(|| load_from_str("redis_url = \"http://x\"\n")), "redis_url"),
        (Box::new(|| load_from_str("[seal]\nkeys = [\"k1:AAAA\"]\n")), "seal.keys"),
        (Box::new(|| load_from_str("[log]\nlevel = \"==nonsense==\"\n")), "log.level"),
        (Box::new(|| load_from_str("[http]\nallowed_origins = [\"evil\"]\n")), "http.allowed_origins"),
        (Box::new(|| load_from_str("[auth]\nmode = \"jwt\"\n")), "auth.jwt.issuer"),
        (
            Box::new(|| {
                load_from_str(
                    "[auth]\nmode = \"jwt\"\nresource = \"https://m/mcp\"\nauthorization_servers = [\"https://a\"]\n[auth.jwt]\nissuer = \"https://a\"\n",
                )
            }),
            "auth.jwt.public_key_files",
        ),
        (
            Box::new(|| {
                load_from_str(
                    "[auth]\nmode = \"jwt\"\nresource = \"https://m/mcp\"\nauthorization_servers = [\"https://a\"]\n[auth.jwt]\nissuer = \"https://a\"\nalgorithms = [\"HS256\"]\nhs256_secrets = [\"short\"]\n",
                )
            }),
            "auth.jwt.hs256_secrets",
        ),
        (
            Box::new(|| {
                load_from_str(
                    "[auth]\nmode = \"jwt\"\nresource = \"https://m/mcp\"\nauthorization_servers = [\"https://a\"]\n[auth.jwt]\nissuer = \"https://a\"\njwks_url = \"http://idp.example.com/jwks\"\n",
                )
            }),
            "auth.jwt.jwks_url",
        ),
        (
            Box::new(|| {
                load_from_str(
                    "[auth]\nmode = \"jwt\"\nresource = \"https://m/mcp\"\n[auth.jwt]\nissuer = \"https://a\"\njwks_url = \"https://a/jwks\"\n",
                )
            }),
            "auth.authorization_servers",
        ),
        (Box::new(|| load_from_str("[auth]\nmode = \"kerberos\"\n")), "configuration"),
        (Box::new(|| load_from_str("[tasks]\nmax_running = 0\n")), "tasks.max_running"),
        (Box::new(|| load_from_str("[store]\ncluster = true\n")), "store.cluster"),
        (
            Box::new(|| {
                load_from_str(&format!("redis_url = \"redis://a:6379,redis://b:6379\"\n[seal]\nkeys = [\"{KEY}\"]\n"))
            }),
            "store.cluster = true",
        ),
        (
            Box::new(|| {
                load_from_str(&format!(
                    "redis_url = \"redis://127.0.0.1:6379\"\n[seal]\nkeys = [\"{KEY}\"]\n[tasks]\nlease_ms = 3000\n"
                ))
            }),
            "tasks.lease_ms",
        ),
    ];
    for (load, needle) in cases {
        let text = error_text(load().expect_err(needle));
        assert!(text.contains(needle), "expected {needle:?} in {text:?}");
    }
}

#[test]
fn a_missing_config_file_is_reported() {
    let cli = Cli { config: Some("/nonexistent/mcpgate.toml".into()), ..Cli::default() };
    let text = error_text(load(&cli, &env(&[])).expect_err("missing file"));
    assert!(text.contains("/nonexistent/mcpgate.toml"), "{text}");
}

#[test]
fn secrets_are_never_echoed() {
    let secret = "sup3r-s3cret-value-that-must-not-leak";
    let text = error_text(
        load(&Cli::default(), &env(&[("MCPGATE_SEAL_KEYS", &format!("k1:{secret}"))])).expect_err("bad key"),
    );
    assert!(text.contains("seal.keys") && !text.contains(secret), "{text}");
    let c =
        load_from_str(&format!("[auth.jwt]\nhs256_secrets = [\"{secret}\"]\n")).expect("valid (mode none ignores it)");
    assert!(!format!("{c:?}").contains(secret), "Debug redacts secrets");
    let text = error_text(
        load(&Cli::default(), &env(&[("MCPGATE_REDIS_URL", &format!("http://:{secret}@redis:6379"))]))
            .expect_err("bad scheme"),
    );
    assert!(text.contains("redis_url") && !text.contains(secret), "{text}");
}

#[test]
fn non_loopback_anonymous_needs_an_explicit_opt_in() {
    let c = load_from_str("listen = \"0.0.0.0:8080\"\n[auth]\nallow_anonymous_non_loopback = true\n")
        .expect("explicitly allowed");
    assert!(!c.listens_on_loopback());
}

#[test]
fn multi_replica_mode_accepts_shared_keys() {
    let c = load(
        &Cli { redis_url: Some("redis://127.0.0.1:6379".to_owned()), ..Cli::default() },
        &env(&[(
            "MCPGATE_SEAL_KEYS",
            "k2:HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=,k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        )]),
    )
    .expect("valid");
    assert!(c.is_multi_replica());
    assert_eq!(c.seal.keys.len(), 2);
}

#[test]
fn every_config_field_has_a_setting_and_every_setting_a_field() {
    // Give optional fields a value so they appear when serialized.
    let mut c = Config { redis_url: Some(String::new()), ..Config::default() };
    c.server.instructions = Some(String::new());
    c.auth.resource = Some(String::new());
    c.auth.jwt.issuer = Some(String::new());
    c.auth.jwt.audience = Some(String::new());
    c.auth.jwt.jwks_file = Some(String::new());
    c.auth.jwt.jwks_url = Some(String::new());
    c.federation.mcp_servers_file = Some(String::new());
    c.admin.listen = Some(std::net::SocketAddr::from(([127, 0, 0, 1], 9091)));
    c.admin.token = Some(mcpgate::config::Secret::new(""));
    c.server.public_url = Some(String::new());
    c.server.client_metadata_url = Some(String::new());
    c.auth.browser_login.client_id = Some(String::new());
    c.auth.browser_login.client_secret = Some(mcpgate::config::Secret::new(""));
    c.audit.path = Some(String::new());
    c.store.tls_ca_file = Some(String::new());
    c.store.sentinel = Some(mcpgate::config::SentinelConfig {
        username: Some(String::new()),
        password: Some(mcpgate::config::Secret::new("")),
        sentinel_username: Some(String::new()),
        sentinel_password: Some(mcpgate::config::Secret::new("")),
        ..Default::default()
    });
    let table = toml::Table::try_from(&c).expect("serializes");
    let mut keys = Vec::new();
    fn walk(prefix: &str, t: &toml::Table, out: &mut Vec<String>) {
        for (k, v) in t {
            let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
            match v {
                toml::Value::Table(inner) => walk(&key, inner, out),
                _ => out.push(key),
            }
        }
    }
    walk("", &table, &mut keys);
    keys.sort();
    let mut settings: Vec<String> = SETTINGS.iter().map(|s| s.key.to_owned()).collect();
    settings.sort();
    assert_eq!(keys, settings);
    for s in SETTINGS {
        assert!(s.env_name().starts_with("MCPGATE_") && !s.help.is_empty(), "{}", s.key);
    }
}

#[test]
fn the_example_config_in_deploy_is_valid() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/mcpgate.example.toml");
    let text = std::fs::read_to_string(path).expect("deploy/mcpgate.example.toml exists");
    let c = load_from_str(&text).expect("the example config is valid");
    assert_eq!(c.auth.mode, AuthMode::Jwt);
    assert_eq!(c.tasks.max_running, 256);
    assert_eq!(c.store.shards, 16);
}

#[test]
fn the_example_upstreams_in_deploy_are_valid() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/upstreams.example.toml");
    let text = std::fs::read_to_string(path).expect("deploy/upstreams.example.toml exists");
    let c = load_from_str(&text).expect("the example upstreams are valid");
    assert_eq!(c.upstream.len(), 1);
    assert_eq!(c.upstream[0].name, "everything");
    assert_eq!(c.toolset, ["demo", "conformance"]);
}

#[test]
fn upstream_tables_are_validated_and_their_secrets_never_shown() {
    let env = |var: &str| (var == "SEARCH_TOKEN").then(|| "tok-12345".to_owned());
    let ok = "[[upstream]]\nname = \"search\"\ntransport = \"http\"\nurl = \"https://search.example/mcp\"\nheaders = { Authorization = \"Bearer ${SEARCH_TOKEN}\" }\n";
    let c = mcpgate::config::load_from_str_with_env(ok, &env).expect("valid");
    assert_eq!(c.upstream[0].headers["Authorization"], "Bearer tok-12345");
    assert!(c.toolset.is_empty(), "the demo toolset is off once upstreams are configured");
    assert!(!format!("{c:?}").contains("tok-12345"), "Debug shows a secret");
    for (text, named) in [
        ("[[upstream]]\nname = \"a\"\ncommand = \"x\"\n[[upstream]]\nname = \"a\"\ncommand = \"y\"\n", "name"),
        ("[[upstream]]\nname = \"a\"\ncommand = \"x\"\ntimeout_secs = 0\n", "timeout_secs"),
        ("[[upstream]]\nname = \"a\"\ntransport = \"sse\"\n", "url"),
        ("[[upstream]]\nname = \"a\"\ncommand = \"x\"\ntask = \"sometimes\"\n", "task"),
        ("upstream = 1\n", "upstream"),
        ("[federation]\nseparator = \"/\"\n[[upstream]]\nname = \"a\"\ncommand = \"x\"\n", "separator"),
    ] {
        let err = error_text(mcpgate::config::load_from_str_with_env(text, &env).expect_err(text));
        assert!(err.contains(named), "{named:?} not named in {err}");
    }
    let with_demo = format!("toolset = [\"demo\"]\n{ok}");
    assert_eq!(mcpgate::config::load_from_str_with_env(&with_demo, &env).expect("valid").toolset, ["demo"]);
}

#[test]
fn token_exchange_tables_expand_their_secret_and_are_validated() {
    let env = |var: &str| (var == "TX_SECRET").then(|| "tx-s3cret-9".to_owned());
    let exchange = "[upstream.token_exchange]\ntoken_url = \"https://auth.example/token\"\nclient_id = \"gw\"\n\
                    client_secret = \"${TX_SECRET}\"\naudience = \"search\"\n";
    let ok = format!(
        "[[upstream]]\nname = \"search\"\ntransport = \"http\"\nurl = \"https://search.example/mcp\"\n{exchange}"
    );
    let c = mcpgate::config::load_from_str_with_env(&ok, &env).expect("valid");
    let tx = c.upstream[0].token_exchange.as_ref().expect("token_exchange");
    assert_eq!((tx.client_secret.as_str(), tx.audience.as_deref()), ("tx-s3cret-9", Some("search")));
    assert!(!format!("{c:?}").contains("tx-s3cret-9"), "Debug shows the client secret");
    for (text, named) in [
        (format!("[[upstream]]\nname = \"files\"\ncommand = \"npx\"\n{exchange}"), "token_exchange"),
        (ok.replace("https://auth.example", "http://auth.example"), "token_exchange.token_url"),
        (ok.replace("audience = \"search\"\n", ""), "token_exchange.audience"),
        (ok.replace("${TX_SECRET}", "${NOT_SET}"), "token_exchange.client_secret"),
        (
            ok.replace(
                "[upstream.token_exchange]",
                "headers = { Authorization = \"Bearer x\" }\n[upstream.token_exchange]",
            ),
            "headers.Authorization",
        ),
    ] {
        let err = error_text(mcpgate::config::load_from_str_with_env(&text, &env).expect_err(&text));
        assert!(err.contains(named) && !err.contains("tx-s3cret-9"), "{named:?} not named in {err}");
    }
}

/// docs/configuration.md, the settings reference.
fn configuration_doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md"))
        .expect("docs/configuration.md")
}

/// The first cell of every table row in the part of `doc` from `heading` to the next `## `
/// heading, for rows whose first cell is one backquoted name.
fn first_cells(doc: &str, heading: &str) -> Vec<String> {
    let start = doc.find(heading).unwrap_or_else(|| panic!("docs/configuration.md lacks {heading}"));
    let section = &doc[start + heading.len()..];
    let section = section.find("\n## ").map_or(section, |end| &section[..end]);
    section
        .lines()
        .filter_map(|line| line.strip_prefix("| `")?.split_once("` |").map(|(name, _)| name.to_owned()))
        .collect()
}

#[test]
fn the_configuration_doc_lists_exactly_the_upstream_keys() {
    let listed = first_cells(&configuration_doc(), "## Keys of an `[[upstream]]` table");
    let keys: Vec<&str> = mcpgate_upstream::config::KEYS.iter().map(|(key, _)| *key).collect();
    for key in &keys {
        assert!(listed.iter().any(|l| l == key), "docs/configuration.md's upstream table lacks `{key}`");
    }
    for l in &listed {
        assert!(keys.contains(&l.as_str()), "docs/configuration.md lists `{l}`, which is no upstream key");
    }
}

#[test]
fn the_configuration_doc_lists_exactly_the_settings() {
    let doc = configuration_doc();
    for s in SETTINGS {
        let row = format!("| `{}` | `{}` |", s.key, s.env_name());
        assert!(doc.contains(&row), "docs/configuration.md's settings table lacks {row}");
    }
    // Every row naming an environment variable must be a setting that still exists.
    let rows: Vec<&str> = doc.lines().filter(|l| l.starts_with("| `") && l.contains("` | `MCPGATE_")).collect();
    for row in &rows {
        assert!(
            SETTINGS.iter().any(|s| row.starts_with(&format!("| `{}` | `{}` |", s.key, s.env_name()))),
            "docs/configuration.md lists a setting that does not exist: {row}"
        );
    }
    assert_eq!(rows.len(), SETTINGS.len(), "docs/configuration.md lists some setting twice");
    let listed = first_cells(&doc, "## Settings");
    assert_eq!(listed.len(), SETTINGS.len(), "the settings table has rows that are not settings: {listed:?}");
}

/// The bracketed default ending a settings row's description, if any.
fn documented_default(row: &str) -> Option<&str> {
    let description = row.trim_end().strip_suffix('|')?.trim_end();
    let inner = description.strip_suffix(']')?;
    let open = inner.rfind('[')?;
    let default = &inner[open + 1..];
    (!default.contains(']')).then_some(default)
}

#[test]
fn the_configuration_doc_shows_the_defaults_of_the_code() {
    let doc = configuration_doc();
    let defaults = mcpgate::config::settings::defaults();
    let mut wrong = Vec::new();
    for s in SETTINGS {
        let start = format!("| `{}` | `{}` |", s.key, s.env_name());
        let row = doc.lines().find(|l| l.starts_with(&start)).expect("every setting has a row");
        let computed = s.default_text(&defaults);
        if documented_default(row) != computed.as_deref() {
            wrong.push(format!("{}: docs say {:?}, the code {computed:?}", s.key, documented_default(row)));
        }
    }
    assert!(wrong.is_empty(), "docs/configuration.md's defaults differ from Config::default():\n{}", wrong.join("\n"));
    // Spot checks that the defaults are computed, not absent.
    assert_eq!(SETTINGS[0].default_text(&defaults).as_deref(), Some("127.0.0.1:8080"));
    let lease = SETTINGS.iter().find(|s| s.key == "tasks.lease_ms").expect("tasks.lease_ms");
    assert_eq!(lease.default_text(&defaults), Some(mcpgate::Config::default().tasks.lease_ms.to_string()));
    let keys = SETTINGS.iter().find(|s| s.key == "seal.keys").expect("seal.keys");
    assert_eq!(keys.default_text(&defaults), None, "a secret shows no default");
}

#[test]
fn background_settings_are_validated() {
    let c = load_from_str("[tasks]\nanonymous_scope = \"server\"\n[background]\nstatus_tool = \"jobs.status\"\n")
        .expect("valid");
    assert_eq!(c.tasks.anonymous_scope, mcpgate::config::AnonymousScope::Server);
    assert_eq!((c.background.status_tool.as_str(), c.background.result_tool.as_str()), ("jobs.status", "task_result"));
    for (text, named) in [
        ("[background]\nstatus_tool = \"\"\n", "background.status_tool"),
        ("[background]\ncancel_tool = \"has space\"\n", "background.cancel_tool"),
        ("[background]\nresult_tool = \"task_status\"\n", "background.result_tool"),
        ("[background]\nbusy_retry_secs = 0\n", "background.busy_retry_secs"),
        ("[tasks]\nanonymous_scope = \"world\"\n", "anonymous_scope"),
    ] {
        let err = error_text(load_from_str(text).expect_err(text));
        assert!(err.contains(named), "{named:?} not named in {err}");
    }
}

#[test]
fn the_helm_charts_env_values_name_real_settings() {
    let values = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/helm/mcpgate/values.yaml"))
        .expect("deploy/helm/mcpgate/values.yaml");
    let env: Vec<&str> = values
        .lines()
        .skip_while(|l| *l != "env:")
        .skip(1)
        .take_while(|l| l.starts_with("  ") || l.is_empty())
        .filter_map(|l| l.trim().split_once(':').map(|(k, _)| k))
        .collect();
    assert!(env.len() >= 5, "the env values were not found: {env:?}");
    let names: Vec<String> = SETTINGS.iter().map(|s| s.env_name()).collect();
    for key in env {
        assert!(names.iter().any(|n| n == key), "values.yaml env names {key}, which is no setting");
    }
}

#[test]
fn the_admin_api_needs_a_strong_token_and_a_listener_of_its_own() {
    let token = "an-admin-token-of-at-least-32-chars!";
    let ok = load_from_str(&format!("[admin]\nlisten = \"127.0.0.1:9091\"\ntoken = \"{token}\"\n")).expect("valid");
    assert_eq!(ok.admin.listen.map(|a| a.port()), Some(9091));
    assert!(!format!("{ok:?}").contains(token), "Debug redacts the admin token");
    assert!(load_from_str("[admin]\ntoken = \"short\"\n").is_ok(), "no listener: no admin API, nothing checked");
    for (text, says) in [
        ("[admin]\nlisten = \"127.0.0.1:9091\"\n".to_owned(), "required"),
        ("[admin]\nlisten = \"127.0.0.1:9091\"\ntoken = \"too-short\"\n".to_owned(), "32 characters"),
        (format!("[admin]\nlisten = \"127.0.0.1:8080\"\ntoken = \"{token}\"\n"), "differ from listen"),
        (format!("[admin]\nlisten = \"nowhere\"\ntoken = \"{token}\"\n"), "admin"),
    ] {
        let err = error_text(load_from_str(&text).expect_err(&text));
        assert!(err.contains("admin") && err.contains(says) && !err.contains(token), "{text}: {err}");
    }
    let short = "too-short-secret";
    let err = error_text(
        load_from_str(&format!("[admin]\nlisten = \"127.0.0.1:9091\"\ntoken = \"{short}\"\n")).expect_err("short"),
    );
    assert!(!err.contains(short), "the token is never echoed: {err}");
}

/// An imported mcpServers file may be a third party's: its `${VAR}`s expand only from the
/// variables `federation.import_env` names, so it cannot pull the admin token (or any other
/// secret of the replica's environment) into a child's env or a header sent to its URL. The
/// operator's own tables expand from the whole environment.
#[test]
fn an_imported_mcp_servers_file_expands_only_the_variables_the_operator_allows() {
    let env = env(&[("MCPGATE_ADMIN_TOKEN", "admin-secret-value"), ("GITHUB_TOKEN", "gh-secret-value")]);
    let servers = file(
        r#"{"mcpServers": {
            "leaky": {"command": "npx", "args": ["x"], "env": {"STOLEN": "${MCPGATE_ADMIN_TOKEN}"}},
            "github": {"url": "https://gh.example/mcp", "headers": {"Authorization": "Bearer ${GITHUB_TOKEN}"}}
        }}"#,
    );
    let path = servers.path().display().to_string();
    let text = format!("[federation]\nmcp_servers_file = {path:?}\n");
    let err = mcpgate::config::load_from_str_with_env(&text, &env).expect_err("the admin token is not expanded");
    let err = error_text(err);
    assert!(err.contains("federation.import_env"), "{err}");
    assert!(!err.contains("admin-secret-value") && !err.contains("gh-secret-value"), "a value in {err}");

    // Allowing GITHUB_TOKEN is not enough for the file that also names the admin token ...
    let allowed = format!("[federation]\nmcp_servers_file = {path:?}\nimport_env = [\"GITHUB_TOKEN\"]\n");
    let err = error_text(mcpgate::config::load_from_str_with_env(&allowed, &env).expect_err("admin token"));
    assert!(err.contains("\"leaky\"") && err.contains("MCPGATE_ADMIN_TOKEN"), "{err}");
    assert!(!err.contains("admin-secret-value"), "a value in {err}");
    // ... but is once the operator's own table replaces that server, expanding what it likes.
    let replaced = format!(
        "{allowed}[[upstream]]\nname = \"leaky\"\ncommand = \"npx\"\nenv = {{ TOKEN = \"${{MCPGATE_ADMIN_TOKEN}}\" }}\n"
    );
    let c = mcpgate::config::load_from_str_with_env(&replaced, &env).expect("valid");
    let github = c.upstream.iter().find(|u| u.name == "github").expect("imported");
    assert_eq!(github.headers["Authorization"], "Bearer gh-secret-value");
    let leaky = c.upstream.iter().find(|u| u.name == "leaky").expect("table");
    assert_eq!(leaky.env["TOKEN"], "admin-secret-value");
}

#[test]
fn replicas_ack_is_validated() {
    let redis = format!("redis_url = \"redis://127.0.0.1:6379\"\n[seal]\nkeys = [\"{KEY}\"]\n");
    let c =
        load_from_str(&format!("{redis}[store]\nreplicas_ack = 1\nreplicas_ack_timeout_ms = 500\n")).expect("valid");
    assert_eq!((c.store.replicas_ack, c.store.replicas_ack_timeout_ms), (1, 500));
    let c = load_from_str(&redis).expect("valid");
    assert_eq!((c.store.replicas_ack, c.store.replicas_ack_timeout_ms), (0, 1_000), "nothing waits by default");
    for (text, named, says) in [
        (format!("{redis}[store]\nreplicas_ack = 17\n"), "store.replicas_ack", "at most 16"),
        ("[store]\nreplicas_ack = 1\n".to_owned(), "store.replicas_ack", "needs a Redis store"),
        (
            format!("{redis}[store]\nreplicas_ack = 1\nreplicas_ack_timeout_ms = 2000\ncommand_timeout_ms = 2000\n"),
            "store.replicas_ack_timeout_ms",
            "below store.command_timeout_ms",
        ),
        (
            format!("{redis}[store]\nreplicas_ack = 1\nreplicas_ack_timeout_ms = 0\n"),
            "store.replicas_ack_timeout_ms",
            "at least 1",
        ),
    ] {
        let err = error_text(load_from_str(&text).expect_err(&text));
        assert!(err.contains(named) && err.contains(says), "{named:?} / {says:?} not in {err}");
    }
    // A timeout at or above the command timeout matters only when something waits.
    load_from_str(&format!("{redis}[store]\nreplicas_ack_timeout_ms = 5000\n")).expect("valid with replicas_ack = 0");
}

/// An unknown key is answered with the setting it most likely meant, or with where it
/// belongs; a file with both `[server]` and `[[server]]` is told to use `[gateway]`.
#[test]
fn unknown_keys_suggest_the_setting_meant() {
    let said = |text: &str| error_text(load_from_str(text).expect_err(text));
    let typo = said("listn = \"127.0.0.1:9000\"\n");
    assert!(typo.contains("listn") && typo.contains("did you mean `listen`?"), "{typo}");
    let typo = said("[htp]\nbody_limit_bytes = 1\n");
    assert!(typo.contains("did you mean [http]?"), "{typo}");
    let misplaced = said("[auth]\npolicy_default = \"deny\"\n");
    assert!(misplaced.contains("auth.policy_default"), "{misplaced}");
    assert!(misplaced.contains("`policy_default` is a top-level setting"), "{misplaced}");
    let elsewhere = said("[http]\nissuer = \"https://a\"\n");
    assert!(elsewhere.contains("did you mean `auth.jwt.issuer`?"), "{elsewhere}");
    let both =
        said("[server]\npublic_url = \"https://gw.example\"\n\n[[server]]\nname = \"ops\"\ntools = [\"echo\"]\n");
    assert!(both.contains("[[server]]") && both.contains("rename [server] to [gateway]"), "{both}");
    // Advice only where something is close: no guess for a key like nothing known.
    let unknown = said("zzzzzzzzzzzz = 1\n");
    assert!(unknown.contains("unknown setting") && !unknown.contains("did you mean"), "{unknown}");
}

/// A sealing key that does not parse is named by its id and place (never its value), and
/// the error says how to make a good one.
#[test]
fn a_bad_sealing_key_is_named_and_the_generator_suggested() {
    let said = |keys: &str| error_text(load_from_str(&format!("[seal]\nkeys = {keys}\n")).expect_err(keys));
    let short = said(&format!("[\"{KEY}\", \"k2:AAAA\"]"));
    assert!(short.contains("\"k2\" (entry 2)") && short.contains("exactly 32 bytes"), "{short}");
    assert!(short.contains("mcpgate --generate-seal-key"), "{short}");
    // The output of `openssl rand -base64 32` alone: no id, and the secret is not echoed.
    let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    let bare = said(&format!("[\"{secret}\"]"));
    assert!(bare.contains("entry 1 (no key id)") && bare.contains("<key id>:<base64"), "{bare}");
    assert!(bare.contains("mcpgate --generate-seal-key") && !bare.contains(secret), "{bare}");
    let bad_id = said("[\"k 1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\"]");
    assert!(bad_id.contains("\"k 1\" (entry 1)"), "{bad_id}");
}
