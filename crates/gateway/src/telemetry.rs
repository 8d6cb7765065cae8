//! Logging: `tracing` to stderr as text or JSON, filtered by `log.level`. Stdout is kept for
//! the one line scripts read (`listening on http://…`).

use tracing_subscriber::EnvFilter;

use crate::config::{LogConfig, LogFormat};
use crate::error::GatewayError;

/// Installs the global subscriber.
pub fn init(config: &LogConfig) -> Result<(), GatewayError> {
    let filter = EnvFilter::try_new(&config.level).map_err(|e| GatewayError::Config {
        setting: "log.level (MCPGATE_LOG_LEVEL)".to_owned(),
        problem: e.to_string(),
    })?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    let result = match config.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| GatewayError::Startup { what: "installing the logger".to_owned(), problem: e.to_string() })
}
