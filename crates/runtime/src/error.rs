//! The one error type of the runtime crate.

/// What can go wrong in the runtime.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    /// A tool, prompt or resource cannot be registered (start-up only).
    #[error("{what}: {problem}")]
    Registration {
        /// What was being registered.
        what: String,
        /// What is wrong.
        problem: String,
    },
}
