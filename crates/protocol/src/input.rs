//! Multi round-trip requests (MRTR, 2026-07-28): input requests a server embeds in a result,
//! the client's answers, and `InputRequiredResult`.
//!
//! Invariant: input requests are plain `{method, params}` pairs without JSON-RPC ids; keys
//! are chosen by the server and map answers back to requests.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::elicitation::{ElicitParams, ElicitResult};
use crate::json::JsonObject;
use crate::result::{ResultMeta, ResultType};
use crate::roots::ListRootsResult;
use crate::sampling::{CreateMessageParams, CreateMessageResult};

/// One thing the server needs from the client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method")]
pub enum InputRequest {
    /// Ask the user.
    #[serde(rename = "elicitation/create")]
    Elicitation {
        /// What to ask.
        params: ElicitParams,
    },
    /// Ask the client's model.
    #[serde(rename = "sampling/createMessage")]
    Sampling {
        /// The sampling request.
        params: CreateMessageParams,
    },
    /// Ask for the client's roots.
    #[serde(rename = "roots/list")]
    ListRoots {
        /// Usually absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        params: Option<JsonObject>,
    },
}

/// The client's answer to one input request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum InputResponse {
    /// Answer to `elicitation/create`.
    Elicitation(ElicitResult),
    /// Answer to `sampling/createMessage`.
    Sampling(CreateMessageResult),
    /// Answer to `roots/list`.
    ListRoots(ListRootsResult),
}

impl InputRequest {
    /// The method the client answers.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Elicitation { .. } => "elicitation/create",
            Self::Sampling { .. } => "sampling/createMessage",
            Self::ListRoots { .. } => "roots/list",
        }
    }
}

impl InputResponse {
    /// The method this answers.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Elicitation(_) => "elicitation/create",
            Self::Sampling(_) => "sampling/createMessage",
            Self::ListRoots(_) => "roots/list",
        }
    }

    /// Decodes an answer as the result of `method` (the request it answers): unlike the
    /// untagged decoding, a result can never be read as another method's.
    pub fn decode_for<'de, D: serde::Deserializer<'de>>(method: &str, answer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        match method {
            "elicitation/create" => ElicitResult::deserialize(answer).map(Self::Elicitation),
            "sampling/createMessage" => CreateMessageResult::deserialize(answer).map(Self::Sampling),
            "roots/list" => ListRootsResult::deserialize(answer).map(Self::ListRoots),
            other => Err(D::Error::custom(format!("no input request method {other:?}"))),
        }
    }
}

/// Outstanding input requests by key.
pub type InputRequests = BTreeMap<String, InputRequest>;
/// Answers by the key of the request they answer.
pub type InputResponses = BTreeMap<String, InputResponse>;

/// Answers as they arrive in params, undecoded: a server must ignore keys it did not ask for
/// (even malformed ones), so each answer is decoded only when its key is wanted.
pub type RawInputResponses = JsonObject;

/// Decodes the answers that are well-formed; returns them and the keys that were not.
pub fn decode_input_responses(raw: &RawInputResponses) -> (InputResponses, Vec<String>) {
    let mut answers = InputResponses::new();
    let mut malformed = Vec::new();
    for (key, value) in raw {
        match InputResponse::deserialize(value) {
            Ok(answer) => {
                answers.insert(key.clone(), answer);
            }
            Err(_) => malformed.push(key.clone()),
        }
    }
    (answers, malformed)
}

/// `{resultType:"input_required", inputRequests?, requestState?}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InputRequiredResult {
    /// What the client must answer before retrying.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_requests: Option<InputRequests>,
    /// Opaque state the client echoes on the retry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_state: Option<String>,
    /// `"input_required"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result_type: Option<ResultType>,
    /// Result metadata.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

crate::impl_mcp_result!(InputRequiredResult);
