//! Elicitation (`elicitation/create`): asking the user for structured input or to visit a URL.

use serde::{Deserialize, Serialize};

use crate::json::JsonObject;

/// `elicitation/create` params: a form or a URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ElicitParams {
    /// Form mode (`mode` absent or `"form"`).
    Form(ElicitFormParams),
    /// URL mode (`mode: "url"`).
    Url(ElicitUrlParams),
}

/// Form-mode elicitation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitFormParams {
    /// `"form"`, or absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to ask the user.
    pub message: String,
    /// A flat object schema of primitive properties.
    pub requested_schema: JsonObject,
}

/// URL-mode elicitation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElicitUrlParams {
    /// `"url"`.
    pub mode: String,
    /// Why the user should open the URL.
    pub message: String,
    /// The URL (never carrying secrets).
    pub url: String,
}

/// What the user did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// Submitted (form) or consented to open the URL.
    Accept,
    /// Explicitly declined.
    Decline,
    /// Dismissed without choosing.
    Cancel,
}

/// `elicitation/create` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// The user's action.
    pub action: ElicitAction,
    /// Submitted values (form + accept only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<JsonObject>,
    /// Extension metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}
