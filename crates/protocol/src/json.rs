//! The shape every open-ended field of the schema takes.

/// A JSON object (`{string: any}`).
pub type JsonObject = serde_json::Map<String, serde_json::Value>;
