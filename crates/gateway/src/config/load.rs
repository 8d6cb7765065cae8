//! Loading: layering the sources into one TOML table, type-checking every value against its
//! setting, deserializing, then validating meaning. Every error names the setting and where
//! its value came from, and never echoes a secret value.

use serde::Deserialize;
use toml::{Table, Value};

use super::settings::{self, Kind, SETTINGS, Setting, invalid};
use super::{Cli, Config};
use crate::error::StartupError;

/// Loads the configuration from the CLI flags, the file they name, and `env` (a lookup of
/// environment variables; pass `|k| std::env::var(k).ok()` in the binary, a map in tests).
pub fn load(cli: &Cli, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, StartupError> {
    let (table, tables) = match &cli.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| StartupError::config_caused("--config", format!("cannot read {}", path.display()), e))?;
            parse_file(&text, &path.display().to_string())?
        }
        None => (Table::new(), ListTables::default()),
    };
    layered(table, tables, cli, env)
}

/// Loads TOML `text` as a program's own defaults with `env`'s `MCPGATE_*` variables on top
/// (as the binary layers them over its config file), validated: how a program built on the
/// library takes its settings from the environment.
pub fn load_with_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, StartupError> {
    let (table, tables) = parse_file(text, "configuration text")?;
    layered(table, tables, &Cli::default(), env)
}

/// Puts the environment, then the flags, over a file's table.
fn layered(
    mut table: Table,
    tables: ListTables,
    cli: &Cli,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Config, StartupError> {
    for setting in SETTINGS {
        let name = setting.env_name();
        if let Some(raw) = env(&name) {
            let source = format!("environment variable {name}");
            match parse_text(setting, &raw, &source)? {
                Some(value) => insert(&mut table, setting.key, value),
                None => remove(&mut table, setting.key),
            }
        }
    }
    for (key, raw) in cli.overrides() {
        let setting = settings::find(key)
            .ok_or_else(|| StartupError::config(key.to_owned(), "flag without a setting".to_owned()))?;
        let flag = format!("--{}", key.replace(['.', '_'], "-"));
        if let Some(value) = parse_text(setting, raw, &flag)? {
            insert(&mut table, setting.key, value);
        }
    }
    finish(table, tables, env)
}

/// Loads a configuration from TOML text alone (defaults for everything else, `${VAR}` in
/// upstream values expanded from `env`), validated.
pub fn load_from_str_with_env(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, StartupError> {
    let (table, tables) = parse_file(text, "configuration text")?;
    finish(table, tables, env)
}

/// Loads a configuration from TOML text alone (defaults for everything else), validated.
pub fn load_from_str(text: &str) -> Result<Config, StartupError> {
    load_from_str_with_env(text, &|_| None)
}

/// Deserializes the layered table, resolves the upstreams, validates.
fn finish(table: Table, tables: ListTables, env: &dyn Fn(&str) -> Option<String>) -> Result<Config, StartupError> {
    let toolset_given = table.contains_key("toolset");
    let mut config = Config::deserialize(Value::Table(table))
        .map_err(|e| StartupError::config_caused("configuration", "not a valid configuration", e))?;
    let federation = &config.federation;
    config.policy = policy_rules(tables.policy)?;
    config.servers = virtual_servers(tables.server)?;
    let upstream_tables = named_tables(tables.upstream, "upstream", "not a valid [[upstream]] table")?;
    config.upstream = super::upstreams::resolve(
        upstream_tables,
        federation.mcp_servers_file.as_deref(),
        &federation.import_env,
        env,
    )?;
    // Upstreams replace the demo tools unless the operator asked for them.
    if !toolset_given && !config.upstream.is_empty() {
        config.toolset.clear();
    }
    super::validate::validate(&config)?;
    Ok(config)
}

/// The arrays of tables of a file, read apart from its settings.
#[derive(Default)]
struct ListTables {
    upstream: Vec<Value>,
    policy: Vec<Value>,
    server: Vec<Value>,
}

/// What a file may call its `[server]` settings table (TOML cannot hold both `[server]` and
/// the `[[server]]` tables of virtual servers).
const GATEWAY_TABLE: &str = "gateway";

/// Parses a file: the settings table (checked leaf by leaf), its `[[upstream]]`, `[[policy]]`
/// and `[[server]]` tables.
fn parse_file(text: &str, source: &str) -> Result<(Table, ListTables), StartupError> {
    let mut table: Table =
        text.parse().map_err(|e: toml::de::Error| match super::suggest::server_table_clash(text) {
            Some(clash) => StartupError::config_caused(source, format!("not valid TOML: {clash}"), e),
            None => StartupError::config_caused(source, "not valid TOML", e),
        })?;
    // `[server]` is a table of settings, `[[server]]` the virtual servers (TOML allows one of
    // the two in a file).
    let virtual_servers = table.get("server").is_some_and(Value::is_array);
    let mut take = |key: &str| match table.remove(key) {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => {
            Err(StartupError::config(key.to_owned(), format!("in {source}: write each {key} as a [[{key}]] table")))
        }
    };
    let server = if virtual_servers { take("server")? } else { Vec::new() };
    let tables = ListTables { upstream: take("upstream")?, policy: take("policy")?, server };
    // `[gateway]` is another name of the `[server]` settings, for a file with `[[server]]`.
    if let Some(settings) = table.remove(GATEWAY_TABLE) {
        if table.contains_key("server") {
            return Err(StartupError::config(
                GATEWAY_TABLE,
                format!("in {source}: [gateway] is another name of [server]: write one of the two"),
            ));
        }
        table.insert("server".to_owned(), settings);
    }
    normalize(&mut table, "", source)?;
    Ok((table, tables))
}

/// The `[[policy]]` tables, each error naming its rule (or its position, when it has no name).
/// What the rules mean is checked by `validate`.
fn policy_rules(tables: Vec<Value>) -> Result<Vec<crate::policy::PolicyRule>, StartupError> {
    named_tables(tables, "policy rule", "not a valid rule")
}

/// The `[[server]]` tables, each error naming its server (or its position, when it has no
/// name). Names and paths are checked by `validate`, rules when the endpoints are built.
fn virtual_servers(tables: Vec<Value>) -> Result<Vec<super::VirtualServer>, StartupError> {
    named_tables(tables, "server", "not a valid [[server]] table")
}

/// Each of `tables` as a `T`; an error names the table as `<kind> "<name>"` (or `<kind> #<n>`
/// when it has no name) and says `problem`.
fn named_tables<T: serde::de::DeserializeOwned>(
    tables: Vec<Value>,
    kind: &str,
    problem: &str,
) -> Result<Vec<T>, StartupError> {
    tables
        .into_iter()
        .enumerate()
        .map(|(i, table)| {
            let label = table
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("{kind} #{}", i + 1), |n| format!("{kind} {n:?}"));
            T::deserialize(table).map_err(|e| StartupError::config_caused(label, problem, e))
        })
        .collect()
}

/// Checks that every leaf is a known setting of the right kind; a lone string where a list
/// is expected becomes a one-element list.
fn normalize(table: &mut Table, prefix: &str, source: &str) -> Result<(), StartupError> {
    for (key, value) in table.iter_mut() {
        let path = if prefix.is_empty() { key.clone() } else { format!("{prefix}.{key}") };
        if let Value::Table(inner) = value {
            let is_section = SETTINGS.iter().any(|s| s.key.starts_with(&format!("{path}.")));
            if is_section {
                normalize(inner, &path, source)?;
                continue;
            }
        }
        let setting = settings::find(&path).ok_or_else(|| {
            let hint = super::suggest::unknown_key_hint(&path, value.is_table());
            StartupError::config(path.clone(), format!("unknown setting in {source}{hint}"))
        })?;
        let fits = match (setting.kind, &*value) {
            (Kind::Str, Value::String(_)) | (Kind::Bool, Value::Boolean(_)) => true,
            (Kind::Int, Value::Integer(i)) => *i >= 0,
            (Kind::List, Value::Array(items)) => items.iter().all(Value::is_str),
            (Kind::List, Value::String(s)) => {
                *value = Value::Array(vec![Value::String(s.clone())]);
                true
            }
            _ => false,
        };
        if !fits {
            return Err(invalid(setting, &format!("in {source}: expected {}", expected(setting.kind))));
        }
    }
    Ok(())
}

fn expected(kind: Kind) -> &'static str {
    match kind {
        Kind::Str => "a string",
        Kind::Int => "a non-negative integer",
        Kind::Bool => "true or false",
        Kind::List => "a list of strings",
    }
}

/// Parses an environment or flag value; `None` means "unset" (an empty string).
fn parse_text(setting: &Setting, raw: &str, source: &str) -> Result<Option<Value>, StartupError> {
    let raw = raw.trim();
    let shown = if setting.secret { String::new() } else { format!(" (got {raw:?})") };
    let value = match setting.kind {
        Kind::Str if raw.is_empty() => return Ok(None),
        Kind::Str => Value::String(raw.to_owned()),
        Kind::Int => raw
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .map(Value::Integer)
            .ok_or_else(|| invalid(setting, &format!("{source}: expected a non-negative integer{shown}")))?,
        Kind::Bool => match raw.to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" => Value::Boolean(true),
            "false" | "0" | "no" | "off" => Value::Boolean(false),
            _ => {
                return Err(invalid(setting, &format!("{source}: expected true or false{shown}")));
            }
        },
        Kind::List => Value::Array(
            raw.split(',').map(str::trim).filter(|s| !s.is_empty()).map(|s| Value::String(s.to_owned())).collect(),
        ),
    };
    Ok(Some(value))
}

fn insert(table: &mut Table, key: &str, value: Value) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(leaf) = parts.pop() else { return };
    let mut current = table;
    for part in parts {
        let entry = current.entry(part.to_owned()).or_insert_with(|| Value::Table(Table::new()));
        if !entry.is_table() {
            *entry = Value::Table(Table::new());
        }
        let Value::Table(next) = entry else { return };
        current = next;
    }
    current.insert(leaf.to_owned(), value);
}

fn remove(table: &mut Table, key: &str) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let Some(leaf) = parts.pop() else { return };
    let mut current = table;
    for part in parts {
        let Some(Value::Table(next)) = current.get_mut(part) else {
            return;
        };
        current = next;
    }
    current.remove(leaf);
}
