//! What stops a replica from starting: `StartupError`, for loading the configuration and
//! building a replica's state. Invariant: it never reaches a client (it stops the replica), and
//! a setting's problem never quotes a secret value.

use mcpgate_runtime::RuntimeError;

use super::chain::BoxError;

/// What stops a replica from starting: a configuration that does not load or validate, or a
/// part of the state (sealer, authenticator, store, upstreams, catalog, logger) that cannot be
/// built. Its `Display` names the setting or the step; the cause, when there is one, is the
/// `source` (shown by `{:#}` and by the binary's exit message).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartupError {
    /// A setting is missing, malformed or inconsistent.
    #[error("invalid setting {setting}: {problem}")]
    Config {
        /// The setting (TOML key and environment twin) or source.
        setting: String,
        /// What is wrong, never including a secret value.
        problem: String,
        /// The error that said so, if another component did (never one carrying a secret).
        #[source]
        source: Option<BoxError>,
    },
    /// A start-up step failed (key files, JWKS, store, upstreams, logger).
    #[error("{what}: {problem}")]
    Step {
        /// What was being done.
        what: String,
        /// What went wrong.
        problem: String,
        /// The error that said so, if another component did.
        #[source]
        source: Option<BoxError>,
    },
    /// A tool, prompt or resource could not be registered.
    #[error(transparent)]
    Runtime {
        /// What the runtime said.
        #[from]
        source: RuntimeError,
    },
}

impl StartupError {
    /// An invalid setting, said in our own words.
    pub fn config(setting: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Config { setting: setting.into(), problem: problem.into(), source: None }
    }

    /// The same error, its setting named as part of `outer` (a rule of a `[[server]]` table:
    /// `server "ops" policy rule "x"`).
    pub fn within(self, outer: &str) -> Self {
        match self {
            Self::Config { setting, problem, source } => {
                Self::Config { setting: format!("{outer} {setting}"), problem, source }
            }
            other => other,
        }
    }

    /// An invalid setting another component refused: `problem` says what, `source` why.
    pub fn config_caused(setting: impl Into<String>, problem: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Config { setting: setting.into(), problem: problem.into(), source: Some(source.into()) }
    }

    /// A failed start-up step, said in our own words.
    pub fn step(what: impl Into<String>, problem: impl Into<String>) -> Self {
        Self::Step { what: what.into(), problem: problem.into(), source: None }
    }

    /// A start-up step another component failed: `problem` says what, `source` why.
    pub fn step_caused(what: impl Into<String>, problem: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Step { what: what.into(), problem: problem.into(), source: Some(source.into()) }
    }
}
