//! Importing a Claude-Desktop-style `mcpServers` JSON object (also VS Code's `servers`) as
//! upstream configurations: `command/args/env/cwd` → stdio, `url` (+ `type`, `headers`) →
//! http or sse, the key → the name (lower-cased, other characters replaced by `-`).
//!
//! Invariant: the import yields configurations that still go through `expand` (from only the
//! variables the operator allows: the file may be a third party's) and `validate`
//! like `[[upstream]]` tables; errors name the server key, never a value.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::{TransportKind, UpstreamConfig};
use crate::error::{UpstreamError, cause};

#[derive(Deserialize)]
struct File {
    #[serde(default, rename = "mcpServers")]
    mcp_servers: Option<BTreeMap<String, Server>>,
    #[serde(default)]
    servers: Option<BTreeMap<String, Server>>,
}

#[derive(Deserialize)]
struct Server {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    cwd: Option<std::path::PathBuf>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    disabled: bool,
}

/// Parses the file's text (`source` names it in errors); servers in key order, disabled ones
/// left out.
pub fn import_mcp_servers(text: &str, source: &str) -> Result<Vec<UpstreamConfig>, UpstreamError> {
    let bad = |key: &str, problem: String| UpstreamError::Config {
        upstream: source.to_owned(),
        key: key.to_owned(),
        problem,
        source: None,
    };
    let file: File = serde_json::from_str(text).map_err(|e| UpstreamError::Config {
        upstream: source.to_owned(),
        key: "mcpServers".to_owned(),
        problem: "not a valid file".to_owned(),
        source: Some(cause(e)),
    })?;
    let servers = file
        .mcp_servers
        .or(file.servers)
        .ok_or_else(|| bad("mcpServers", "the file has no \"mcpServers\" (or \"servers\") object".to_owned()))?;
    let mut out = Vec::with_capacity(servers.len());
    for (key, server) in servers {
        if server.disabled {
            continue;
        }
        let name = normalize_name(&key);
        let kind = server.kind.as_deref().map(str::to_ascii_lowercase);
        let transport = match (kind.as_deref(), &server.url, &server.command) {
            (Some("stdio") | None, None, Some(_)) => TransportKind::Stdio,
            (Some("sse"), Some(_), None) => TransportKind::Sse,
            (Some("http" | "streamable-http" | "streamablehttp") | None, Some(_), None) => TransportKind::Http,
            _ => {
                return Err(bad(
                    &format!("mcpServers.{key}"),
                    "needs either command (stdio) or url (with type http or sse), not both".to_owned(),
                ));
            }
        };
        let mut config = match transport {
            TransportKind::Stdio => UpstreamConfig::stdio(&name, server.command.as_deref().unwrap_or_default(), &[]),
            TransportKind::Http | TransportKind::Sse => {
                UpstreamConfig::http(&name, server.url.as_deref().unwrap_or_default())
            }
        };
        config.transport = transport;
        config.args = server.args;
        config.env = server.env;
        config.cwd = server.cwd;
        config.headers = server.headers;
        out.push(config);
    }
    Ok(out)
}

/// `My Server.v2` → `my-server-v2`, at most 32 characters.
pub fn normalize_name(key: &str) -> String {
    let mut name: String =
        key.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' }).take(32).collect();
    if name.is_empty() {
        name.push_str("server");
    }
    name
}

/// Merges imported servers with `[[upstream]]` tables: a table of the same name replaces the
/// imported server; tables keep their order after the imported ones.
pub fn merge(imported: Vec<UpstreamConfig>, tables: Vec<UpstreamConfig>) -> Vec<UpstreamConfig> {
    let mut out: Vec<UpstreamConfig> =
        imported.into_iter().filter(|i| !tables.iter().any(|t| t.name == i.name)).collect();
    out.extend(tables);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn imports_claude_desktop_servers() {
        let text = r#"{"mcpServers": {
            "Everything": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-everything"], "env": {"K": "${TOKEN}"}},
            "remote_search": {"url": "https://search.example/mcp", "headers": {"Authorization": "Bearer ${T}"}},
            "old": {"type": "sse", "url": "https://old.example/sse"},
            "off": {"command": "x", "disabled": true}
        }}"#;
        let servers = import_mcp_servers(text, "claude.json").unwrap();
        let names: Vec<&str> = servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["everything", "old", "remote-search"]);
        assert_eq!(servers[0].transport, TransportKind::Stdio);
        assert_eq!(servers[0].args.len(), 2);
        assert_eq!(servers[1].transport, TransportKind::Sse);
        assert_eq!(servers[2].transport, TransportKind::Http);
        assert_eq!(servers[2].headers.len(), 1);
    }

    #[test]
    fn rejects_ambiguous_servers_naming_them() {
        let err = import_mcp_servers(r#"{"mcpServers": {"both": {"command": "x", "url": "http://y"}}}"#, "f.json")
            .unwrap_err();
        assert!(err.to_string().contains("mcpServers.both"), "{err}");
        assert!(import_mcp_servers("{}", "f.json").is_err());
    }

    #[test]
    fn tables_override_imports() {
        let imported = vec![UpstreamConfig::stdio("a", "x", &[]), UpstreamConfig::stdio("b", "x", &[])];
        let tables = vec![UpstreamConfig::http("a", "https://a.example/mcp")];
        let merged = merge(imported, tables);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged[0].name, "b");
        assert_eq!(merged[1].transport, TransportKind::Http);
    }
}
