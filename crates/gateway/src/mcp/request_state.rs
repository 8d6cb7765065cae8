//! Multi-round input without server state (2026-07-28 MRTR): the sealed `requestState` that
//! carries one call's progress from a round to the next, and the merge of a retry's answers
//! with it.
//!
//! A round's state holds the tool's own continuation, every answer collected so far (so no
//! question is asked twice, and a client need only answer the latest round) and the keys the
//! last round asked, with their methods (so each answer is checked against what was asked).
//!
//! Threat model: the client holds the state between rounds and may replay it, alter it, keep
//! it past its lifetime, present it as another user, or present it to another tool, prompt,
//! resource, argument set or protocol version. The state is AES-256-GCM sealed with the
//! replica key ring and bound (as associated data) to the principal, the method, and a digest
//! of the target name, the arguments, the protocol version and whether the call runs now or
//! becomes a task; it expires after `seal.request_state_ttl_secs`; with
//! `seal.request_state_single_use` each one is recorded in the store once the retry passed
//! validation, so a replay is refused. Every failure is the same -32602 "invalid
//! requestState"; the reason is logged and counted, never returned. Its plaintext (answers
//! and continuation) is never logged.
//!
//! A client may also answer without a state (the protocol allows it, e.g. a client that
//! knows what a tool will ask). Such answers reach the tool of a call that runs now, which
//! decides what they are worth; they never reach a task. A tool for which "the user was
//! asked" matters keeps a marker in its continuation state and trusts only answers that come
//! with it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use mcpgate_protocol::Era;
use mcpgate_protocol::input::{
    InputRequests, InputResponse, InputResponses, RawInputResponses, decode_input_responses,
};
use mcpgate_runtime::catalog::ToolCall;
use mcpgate_seal::{Binding, OpenFailure, Purpose, SealError, Sealer, context_digest};
use mcpgate_store::OnceMarks as _;

use crate::call_context::CallContext;
use crate::error::GatewayError;
use crate::state::AppState;
use crate::time::now_ms;

/// What one round hands the next (sealed; short field names keep tokens small).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Carried {
    /// The tool's continuation.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    state: Option<Value>,
    /// Answers collected in every round so far.
    #[serde(rename = "a", default, skip_serializing_if = "InputResponses::is_empty")]
    answers: InputResponses,
    /// Keys the last round asked, with their methods.
    #[serde(rename = "q", default)]
    asked: std::collections::BTreeMap<String, String>,
}

/// Most answers one request may carry; a bound on the work one request can cause.
pub(super) const MAX_ANSWERS: usize = 256;

/// How a call runs: now, or as a task (its rounds before the task starts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    /// Within the request.
    Now,
    /// Input gathered before a task is created.
    BeforeTask,
}

/// The call a state belongs to: its binding context.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target {
    context: [u8; 32],
    mode: Mode,
}

impl Target {
    /// The call to `name` (tool, prompt or resource URI) with `arguments`, in the request's
    /// protocol version and `mode`. Arguments serialize with sorted keys, so equal arguments
    /// always give the same digest; absent arguments count as `{}`.
    pub(super) fn new(
        cx: &CallContext,
        name: &str,
        arguments: &impl Serialize,
        mode: Mode,
    ) -> Result<Self, GatewayError> {
        if cx.era == Era::Legacy {
            // 2025-11-25 has no requestState: nothing is sealed for it, so skip the digest.
            return Ok(Self { context: [0; 32], mode });
        }
        let arguments =
            serde_json::to_vec(arguments).map_err(|e| GatewayError::internal_caused("arguments digest", e))?;
        let mode_label: &[u8] = match mode {
            Mode::Now => b"now",
            Mode::BeforeTask => b"before-task",
        };
        let fields: [&[u8]; 4] = [name.as_bytes(), &arguments, cx.version.as_str().as_bytes(), mode_label];
        // A state minted through a virtual server opens only there (the root's binding is
        // unchanged, so states of a replica not yet upgraded still open at the root).
        let context = match cx.endpoint.server() {
            None => context_digest(&fields),
            Some(server) => {
                let [a, b, c, d] = fields;
                context_digest(&[a, b, c, d, b"server", server.as_bytes()])
            }
        };
        Ok(Self { context, mode })
    }

    fn binding<'a>(&'a self, cx: &'a CallContext) -> Binding<'a> {
        Binding {
            purpose: Purpose::RequestState,
            principal: cx.principal.key(),
            method: cx.method.as_str(),
            context: &self.context,
        }
    }
}

/// One round's input: the answers to pass the tool (every round's so far) and its
/// continuation, plus what minting the next round's state needs.
#[derive(Debug)]
pub(super) struct Round {
    target: Target,
    /// Every answer so far.
    pub(super) answers: InputResponses,
    /// The tool's continuation from the previous round.
    pub(super) state: Option<Value>,
    /// The single-use mark still to record (single-use mode): the state's id and expiry.
    mark: Option<(String, u64)>,
}

impl Round {
    /// Opens the echoed state (if any) and merges the retry's answers into it. With a state,
    /// only the keys it asked are taken, and each must be a well-formed answer to what was
    /// asked (-32602 otherwise); other keys are ignored. Without one, a call that runs now
    /// gets every well-formed answer (malformed ones are ignored: the tool asks again), and a
    /// call that will be a task gets none. Call [`Round::commit`] once the request passed
    /// every other check.
    pub(super) fn resume(
        state: &AppState,
        cx: &CallContext,
        target: Target,
        request_state: Option<&str>,
        responses: Option<&RawInputResponses>,
    ) -> Result<Self, GatewayError> {
        if responses.is_some_and(|raw| raw.len() > MAX_ANSWERS) {
            return Err(GatewayError::invalid_params(format!("at most {MAX_ANSWERS} inputResponses per request")));
        }
        let Some(token) = request_state else {
            let answers = match (target.mode, responses) {
                (Mode::Now, Some(raw)) => decode_input_responses(raw).0,
                _ => InputResponses::new(),
            };
            return Ok(Self { target, answers, state: None, mark: None });
        };
        let (carried, mark) = open(state, cx, &target, token)?;
        let mut answers = carried.answers;
        if let Some(raw) = responses {
            for (key, method) in &carried.asked {
                let Some(value) = raw.get(key) else { continue };
                answers.insert(key.clone(), decode_answer(key, method, value)?);
            }
        }
        Ok(Self { target, answers, state: carried.state, mark })
    }

    /// The call the handler runs this round: `arguments`, every answer so far (kept here too,
    /// for the next round's state) and the tool's continuation (handed over).
    pub(super) fn tool_call(&mut self, arguments: Value) -> ToolCall {
        ToolCall { arguments, input_responses: self.answers.clone(), state: self.state.take() }
    }

    /// Records the use of a single-use state: after the retry passed validation, before it
    /// takes effect (a replay arriving meanwhile, on any replica, loses the race).
    pub(super) async fn commit(&mut self, state: &AppState) -> Result<(), GatewayError> {
        let Some((id, until)) = self.mark.take() else { return Ok(()) };
        if state.store.first_use(&id, until).await? {
            Ok(())
        } else {
            state.metrics.seal_failure(OpenFailure::Replayed);
            tracing::info!(reason = OpenFailure::Replayed.as_str(), "requestState rejected");
            Err(GatewayError::InvalidRequestState { reason: OpenFailure::Replayed.as_str() })
        }
    }

    /// The `requestState` for a round that asks `requests`, carrying `continuation` and every
    /// answer so far.
    pub(super) fn next(
        &self,
        state: &AppState,
        cx: &CallContext,
        requests: &InputRequests,
        continuation: Option<Value>,
    ) -> Result<String, GatewayError> {
        let mut answers = self.answers.clone();
        // A key asked again must be answered again: its old answer is not carried.
        answers.retain(|key, _| !requests.contains_key(key));
        let carried = Carried {
            state: continuation,
            answers,
            asked: requests.iter().map(|(k, r)| (k.clone(), r.method().to_owned())).collect(),
        };
        let payload =
            serde_json::to_vec(&carried).map_err(|e| GatewayError::internal_caused("requestState encoding", e))?;
        let expires = now_ms().saturating_add(state.config.seal.request_state_ttl_secs.saturating_mul(1000));
        state.sealer.seal(&self.target.binding(cx), expires, &payload).map_err(|e| match e {
            SealError::TooLarge { size, max } => GatewayError::invalid_params(format!(
                "the answers collected so far are too large to carry to the next round ({size} bytes sealed; \
                 this server allows {max})"
            )),
            other => GatewayError::internal_caused("sealing a requestState", other),
        })
    }
}

/// Decodes an answer as the result of the method that was asked.
fn decode_answer(key: &str, method: &str, value: &Value) -> Result<InputResponse, GatewayError> {
    InputResponse::decode_for(method, value).map_err(|_| {
        GatewayError::invalid_params(format!(
            "inputResponses.{}: not a valid result of {method}",
            crate::error::clip(key)
        ))
    })
}

/// Opens a state; returns it and, in single-use mode, the mark its use will record.
fn open(
    state: &AppState,
    cx: &CallContext,
    target: &Target,
    token: &str,
) -> Result<(Carried, Option<(String, u64)>), GatewayError> {
    let reject = |reason: OpenFailure| {
        state.metrics.seal_failure(reason);
        tracing::info!(reason = reason.as_str(), "requestState rejected");
        GatewayError::InvalidRequestState { reason: reason.as_str() }
    };
    let payload = state
        .sealer
        .open(&target.binding(cx), now_ms(), token)
        .map_err(|e| reject(e.open_failure().unwrap_or(OpenFailure::Malformed)))?;
    // Authentic but undecodable: minted by a build with another format.
    let carried: Carried = serde_json::from_slice(&payload).map_err(|_| reject(OpenFailure::Malformed))?;
    let mark = if state.config.seal.request_state_single_use {
        // The token's nonce identifies it; the mark lives as long as the token could.
        let nonce = Sealer::nonce_of(token).ok_or_else(|| reject(OpenFailure::Malformed))?;
        let id: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let until = now_ms().saturating_add(state.config.seal.request_state_ttl_secs.saturating_mul(1000));
        Some((id, until))
    } else {
        None
    };
    Ok((carried, mark))
}
