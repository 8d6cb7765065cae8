//! Command-line flags: the common settings, `--config`, and `--help` listing every setting
//! with its TOML key and environment twin.

use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches, Parser};

use super::settings::{Kind, SETTINGS, defaults};

/// mcpgate: a stateless, horizontally scalable MCP gateway (2026-07-28 and 2025-11-25 from one endpoint).
#[derive(Debug, Default, Parser)]
#[command(name = "mcpgate", version)]
pub struct Cli {
    /// TOML configuration file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on (`listen`, MCPGATE_LISTEN).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Redis URL (`redis_url`, MCPGATE_REDIS_URL); absent = embedded store.
    #[arg(long, value_name = "URL")]
    pub redis_url: Option<String>,
    /// Toolsets, comma-separated (`toolset`, MCPGATE_TOOLSET).
    #[arg(long, value_name = "a,b")]
    pub toolset: Option<String>,
    /// none | jwt (`auth.mode`, MCPGATE_AUTH_MODE).
    #[arg(long, value_name = "MODE")]
    pub auth_mode: Option<String>,
    /// Sealing keys `kid:base64,…` (`seal.keys`, MCPGATE_SEAL_KEYS); prefer the environment,
    /// since command lines are visible to other local users.
    #[arg(long, value_name = "KEYS")]
    pub seal_keys: Option<String>,
    /// text | json (`log.format`, MCPGATE_LOG_FORMAT).
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
    /// Log filter (`log.level`, MCPGATE_LOG_LEVEL).
    #[arg(long, value_name = "FILTER")]
    pub log_level: Option<String>,
    /// A Claude-Desktop-style JSON file whose `mcpServers` become upstreams
    /// (`federation.mcp_servers_file`, MCPGATE_FEDERATION_MCP_SERVERS_FILE).
    #[arg(long, value_name = "FILE")]
    pub mcp_servers: Option<String>,
    /// Print a fresh sealing key (`kid:base64`) for seal.keys and exit.
    #[arg(long)]
    pub generate_seal_key: bool,
    /// GET this http:// URL and exit 0 if it answers 200, 1 otherwise (a health probe for
    /// images without curl), e.g. --probe http://127.0.0.1:8080/readyz.
    #[arg(long, value_name = "URL")]
    pub probe: Option<String>,
    /// A command instead of serving.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// What `mcpgate` runs instead of a replica.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Operate a running fleet through one replica's admin API (`admin.listen`): list,
    /// inspect, cancel and purge tasks; drain or undrain the replica.
    Admin(crate::admin::AdminArgs),
}

impl Cli {
    /// Parses the process arguments; `--help` lists every setting.
    pub fn parse_args() -> Self {
        let matches = Self::command().after_long_help(settings_help()).get_matches();
        match Self::from_arg_matches(&matches) {
            Ok(cli) => cli,
            Err(e) => e.exit(),
        }
    }

    /// The flags that were given, as `(setting key, raw value)` pairs.
    pub(super) fn overrides(&self) -> Vec<(&'static str, &str)> {
        [
            ("listen", &self.listen),
            ("redis_url", &self.redis_url),
            ("toolset", &self.toolset),
            ("auth.mode", &self.auth_mode),
            ("seal.keys", &self.seal_keys),
            ("log.format", &self.log_format),
            ("log.level", &self.log_level),
            ("federation.mcp_servers_file", &self.mcp_servers),
        ]
        .into_iter()
        .filter_map(|(key, value)| value.as_deref().map(|v| (key, v)))
        .collect()
    }
}

/// The settings table printed after `--help`.
fn settings_help() -> String {
    let mut out = String::from(
        "Settings (TOML key / environment variable): sources apply in the order defaults, --config file, \
         environment, flags. Lists are comma-separated in the environment.\n",
    );
    let defaults = defaults();
    for s in SETTINGS {
        let kind = match s.kind {
            Kind::Str => "string",
            Kind::Int => "integer",
            Kind::Bool => "bool",
            Kind::List => "list",
        };
        let default = s.default_text(&defaults).map(|d| format!(" [{d}]")).unwrap_or_default();
        out.push_str(&format!("\n  {} ({kind}) / {}\n      {}{default}\n", s.key, s.env_name(), s.help));
    }
    out.push_str(
        "\nUpstream servers: one [[upstream]] table each in the --config file (not in the environment), or \
         imported from a Claude-Desktop-style mcpServers JSON file (--mcp-servers). Keys:\n",
    );
    for (key, help) in mcpgate_upstream::config::KEYS {
        out.push_str(&format!("\n  {key}\n      {help}\n"));
    }
    out
}
