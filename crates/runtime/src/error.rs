//! The one error type of the runtime crate.

/// What can go wrong in the runtime.
#[derive(Debug, Clone, thiserror::Error)]
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
    /// A list could not be rendered to JSON.
    #[error("rendering {what}")]
    Rendering {
        /// What was being rendered.
        what: &'static str,
        /// What the serializer said (shared, so the error stays `Clone`).
        #[source]
        source: std::sync::Arc<serde_json::Error>,
    },
}
