//! One `[[server]]` table as the operator wrote it: a virtual server, an MCP endpoint of its
//! own on its own path, serving a selection of the federated catalog under its own rules.
//!
//! Invariant: only the text and its shape live here; [`validate`] refuses, at start-up and
//! naming the server, a bad or duplicate name, a path that is not its own (a duplicate, the
//! root endpoint's, or one under a route the gateway serves itself) and a bad rule (compiled
//! by the policy engine when the endpoints are built).

use std::collections::HashSet;

/// Path of the root MCP endpoint.
pub const MCP_PATH: &str = "/mcp";

use serde::{Deserialize, Serialize};

use crate::error::StartupError;
use crate::policy::{Effect, PolicyRule};

/// Path prefixes the gateway serves itself: no virtual server may live under them.
const RESERVED_PREFIXES: &[&str] =
    &["/.well-known", "/oauth", "/admin", "/healthz", "/readyz", "/metrics", "/upstreams"];

/// A `[[server]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VirtualServer {
    /// Unique name: the policy's `server`, the audit trail's `server`, the default path.
    pub name: String,
    /// Where it is served (default `/servers/<name>/mcp`).
    #[serde(default)]
    pub path: Option<String>,
    /// `serverInfo.title` in `server/discover` and `initialize`.
    #[serde(default)]
    pub title: Option<String>,
    /// `serverInfo.description`.
    #[serde(default)]
    pub description: Option<String>,
    /// Instructions for the model (its own; the root's are not inherited).
    #[serde(default)]
    pub instructions: Option<String>,
    /// Globs over the exposed tool names; absent: none.
    #[serde(default)]
    pub tools: Vec<String>,
    /// Globs over the prompt names; absent: none.
    #[serde(default)]
    pub prompts: Vec<String>,
    /// Globs over resource URIs and URI templates; absent: none.
    #[serde(default)]
    pub resources: Vec<String>,
    /// What its policy decides when none of its rules holds.
    #[serde(default = "allow")]
    pub policy_default: Effect,
    /// Answer a denied use as an unknown tool, prompt or resource.
    #[serde(default)]
    pub policy_hide_denied: bool,
    /// `[[server.policy]]` rules, in order (the root's `[[policy]]` do not apply here).
    #[serde(default)]
    pub policy: Vec<PolicyRule>,
    /// How tools are offered.
    #[serde(default)]
    pub discovery: Discovery,
}

fn allow() -> Effect {
    Effect::Allow
}

/// How a virtual server offers its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Discovery {
    /// `tools/list` lists them all.
    #[default]
    List,
    /// `tools/list` holds `search_tools` and `call_tool` only.
    Search,
}

impl VirtualServer {
    /// A server named `name` on its default path, selecting nothing.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            path: None,
            title: None,
            description: None,
            instructions: None,
            tools: Vec::new(),
            prompts: Vec::new(),
            resources: Vec::new(),
            policy_default: Effect::Allow,
            policy_hide_denied: false,
            policy: Vec::new(),
            discovery: Discovery::List,
        }
    }

    /// Where it is served.
    pub fn endpoint_path(&self) -> String {
        self.path.clone().unwrap_or_else(|| format!("/servers/{}/mcp", self.name))
    }

    /// The setting name its errors carry.
    pub fn setting(&self) -> String {
        format!("server {:?}", self.name)
    }
}

/// Checks the servers' names and paths (their rules are compiled with their endpoints).
pub(crate) fn validate(servers: &[VirtualServer], root_path: &str) -> Result<(), StartupError> {
    let mut names = HashSet::new();
    let mut paths = HashSet::new();
    for server in servers {
        let setting = server.setting();
        if !valid_name(&server.name) {
            return Err(StartupError::config(setting, "a server name is 1-64 letters, digits, '_', '-' or '.'"));
        }
        if !names.insert(server.name.as_str()) {
            return Err(StartupError::config(setting, "two [[server]] tables have this name"));
        }
        let path = server.endpoint_path();
        if let Some(problem) = path_problem(&path, root_path) {
            return Err(StartupError::config(format!("{setting} path"), format!("{path:?} {problem}")));
        }
        if !paths.insert(path.clone()) {
            return Err(StartupError::config(format!("{setting} path"), format!("{path:?} is another server's path")));
        }
    }
    Ok(())
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Why `path` cannot be a server's, if it cannot.
fn path_problem(path: &str, root_path: &str) -> Option<&'static str> {
    if !path.starts_with('/') {
        return Some("must start with '/'");
    }
    // The router's own syntax, and what no client would send as a path.
    if path.len() < 2
        || path.ends_with('/')
        || path.contains("//")
        || path.split('/').any(|s| s == "." || s == "..")
        || !path.bytes().all(|b| b.is_ascii_alphanumeric() || b"/_-.~".contains(&b))
    {
        return Some("must be a plain path of letters, digits and / _ - . ~ (no trailing '/', no '.' or '..' segment)");
    }
    if path == root_path {
        return Some("is the root endpoint's path");
    }
    let under = |prefix: &str| path == prefix || path.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('/'));
    if RESERVED_PREFIXES.iter().any(|p| under(p)) {
        return Some(
            "lies under a path the gateway serves itself (/.well-known, /oauth, /admin, /healthz, /readyz, /metrics, /upstreams)",
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        for (path, ok) in [
            ("/servers/ops/mcp", true),
            ("/ops", true),
            ("/mcp", false),
            ("/mcp/ops", true),
            ("ops", false),
            ("/", false),
            ("/ops/", false),
            ("/a//b", false),
            ("/a/../b", false),
            ("/a/{x}", false),
            ("/.well-known/x", false),
            ("/oauth", false),
            ("/oauthx", true),
            ("/admin/mcp", false),
            ("/metrics", false),
            ("/upstreams/x", false),
        ] {
            assert_eq!(path_problem(path, "/mcp").is_none(), ok, "{path}");
        }
    }

    #[test]
    fn names_and_paths_are_unique() {
        let a = VirtualServer::new("a");
        let mut b = VirtualServer::new("b");
        assert!(validate(&[a.clone(), b.clone()], "/mcp").is_ok());
        let err = validate(&[a.clone(), a.clone()], "/mcp").expect_err("duplicate name").to_string();
        assert!(err.contains("server \"a\""), "{err}");
        b.path = Some("/servers/a/mcp".to_owned());
        let err = validate(&[a, b], "/mcp").expect_err("duplicate path").to_string();
        assert!(err.contains("server \"b\" path") && err.contains("another server's path"), "{err}");
        let err = validate(&[VirtualServer::new("bad name")], "/mcp").expect_err("bad name").to_string();
        assert!(err.contains("server \"bad name\""), "{err}");
    }
}
