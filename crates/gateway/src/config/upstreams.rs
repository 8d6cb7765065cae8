//! `[[upstream]]` tables and the `mcpServers` import: merged (a table replaces an imported
//! server of the same name), `${VAR}` expanded, validated. An error names the setting at
//! fault and keeps the upstream crate's error, which names the upstream and its key, as its
//! cause.

use mcpgate_upstream::import::{import_mcp_servers, merge};
use mcpgate_upstream::{UpstreamConfig, UpstreamError};

use crate::error::StartupError;

/// The upstreams of the `[[upstream]]` tables (`parsed`, deserialized in file order) and of
/// the imported `mcpServers` file, each with its `${VAR}`s expanded. A table is the
/// operator's own text and expands from the whole environment; an imported file is often a
/// third party's, so it may name only the variables `import_env` lists (else it could pull
/// any secret of the replica's environment, such as the admin token, into a child's env or a
/// header sent to its URL).
pub(super) fn resolve(
    mut parsed: Vec<UpstreamConfig>,
    mcp_servers_file: Option<&str>,
    import_env: &[String],
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<UpstreamConfig>, StartupError> {
    let mut imported = match mcp_servers_file {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                StartupError::config_caused("federation.mcp_servers_file", format!("cannot read {path}"), e)
            })?;
            import_mcp_servers(&text, path).map_err(|e| {
                StartupError::config_caused("federation.mcp_servers_file", "not a usable mcpServers file", e)
            })?
        }
        None => Vec::new(),
    };
    for u in &mut parsed {
        u.expand(env).map_err(|e| upstream_error(e, "a ${VAR} does not expand", ""))?;
    }
    let allowed = |var: &str| {
        if import_env.iter().any(|name| name == var) { env(var) } else { None }
    };
    for u in &mut imported {
        // Only the servers a table does not replace are used (and so expanded).
        if parsed.iter().any(|t| t.name == u.name) {
            continue;
        }
        u.expand(&allowed).map_err(|e| {
            upstream_error(
                e,
                "a ${VAR} of an imported server does not expand",
                " (an imported mcpServers file may expand only the variables federation.import_env lists)",
            )
        })?;
    }
    let all = merge(imported, parsed);
    mcpgate_upstream::config::validate_all(&all).map_err(|e| upstream_error(e, "not a valid upstream", ""))?;
    Ok(all)
}

/// The start-up error of an upstream's: a configuration error names the upstream's key as the
/// setting (`upstream "files" url`), with `hint` after its problem, and keeps what caused it;
/// any other is caused by `e`, under `problem`.
fn upstream_error(e: UpstreamError, problem: &str, hint: &str) -> StartupError {
    match e {
        UpstreamError::Config { upstream, key, problem, source } => {
            let setting = format!("upstream {upstream:?} {key}");
            let problem = format!("{problem}{hint}");
            match source {
                Some(source) => StartupError::config_caused(setting, problem, source),
                None => StartupError::config(setting, problem),
            }
        }
        other => StartupError::config_caused("upstream", format!("{problem}{hint}"), other),
    }
}
