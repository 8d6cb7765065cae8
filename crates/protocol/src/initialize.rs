//! The legacy handshake: `initialize` (2025-11-25 and older).

use serde::{Deserialize, Serialize};

use crate::capabilities::{ClientCapabilities, ServerCapabilities};
use crate::implementation::Implementation;
use crate::meta::RequestMeta;
use crate::result::{ResultMeta, ResultType};

/// `initialize` params.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeParams {
    /// The newest version the client speaks.
    pub protocol_version: String,
    /// What the client supports for the whole session.
    pub capabilities: ClientCapabilities,
    /// Client implementation.
    pub client_info: Implementation,
    /// Request metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<RequestMeta>,
}

/// `initialize` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version the session uses.
    pub protocol_version: String,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Server implementation.
    pub server_info: Implementation,
    /// Usage hints for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Never set: legacy results carry no `resultType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

crate::impl_mcp_result!(InitializeResult);
