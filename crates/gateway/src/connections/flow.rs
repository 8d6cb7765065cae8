//! The sealed values a connection's steps hand to the browser and get back: the connect link
//! a client shows its user, the `state` of the sign-in at the gateway's issuer, and the
//! `state` of the authorization at the upstream's server.
//!
//! Invariants: each is sealed (AES-GCM, purpose `OAuthFlow`, the step as method, so none
//! opens as another step's), expires ten minutes after it was minted, and is accepted once:
//! its nonce is marked used in the store the first time it is presented, on whichever
//! replica. Nothing in them is usable by whoever reads the URL: the contents are encrypted and
//! the user they are for is checked against who signs in.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use mcpgate_seal::{Binding, Purpose, context_digest};
use mcpgate_store::OnceMarks as _;

use super::{Connector, random_hex};
use crate::error::{ConnectFailure, GatewayError};
use crate::time::now_ms;

/// How long a link or a flow state may be used.
pub(super) const FLOW_TTL_MS: u64 = 10 * 60 * 1000;

/// Which step a sealed value belongs to.
#[derive(Debug, Clone, Copy)]
pub(super) enum Step {
    /// The connect link.
    Link,
    /// The sign-in at the gateway's issuer.
    Login,
    /// The authorization at the upstream's server.
    Authorize,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Self::Link => "connect-link",
            Self::Login => "login-state",
            Self::Authorize => "authorize-state",
        }
    }
}

/// What a connect link asks for: `principal` connects `upstream` (with at least `scopes`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ConnectLink {
    /// The principal's key.
    pub principal: String,
    /// Its issuer and subject, which the user signing in must have.
    pub issuer: String,
    pub subject: String,
    pub upstream: String,
    /// Scopes to ask for besides the usual ones (a step-up).
    #[serde(default)]
    pub scopes: Option<String>,
    /// Single-use nonce (the elicitation id).
    pub nonce: String,
}

/// A sealed value with its nonce.
pub(super) trait Flow: Serialize + DeserializeOwned {
    fn nonce(&self) -> &str;
}

impl Flow for ConnectLink {
    fn nonce(&self) -> &str {
        &self.nonce
    }
}

impl Connector {
    /// A fresh link for `principal` to connect `upstream`: its URL and elicitation id.
    pub(crate) fn connect_link(
        &self,
        principal: &mcpgate_runtime::Principal,
        upstream: &str,
        scopes: Option<String>,
    ) -> Result<(String, String), GatewayError> {
        let link = ConnectLink {
            principal: principal.key().to_owned(),
            issuer: principal.issuer().to_owned(),
            subject: principal.subject().to_owned(),
            upstream: upstream.to_owned(),
            scopes,
            nonce: random_hex()?,
        };
        let sealed = self.seal_flow(Step::Link, &link)?;
        Ok((self.public(&format!("{}/{sealed}", super::CONNECT_PATH)), link.nonce))
    }

    /// Seals a step's value, valid for [`FLOW_TTL_MS`].
    pub(super) fn seal_flow<T: Flow>(&self, step: Step, value: &T) -> Result<String, GatewayError> {
        let plain = serde_json::to_vec(value)
            .map_err(|e| GatewayError::internal_caused(format!("cannot serialize a {}", step.name()), e))?;
        let context = context_digest(&[step.name().as_bytes()]);
        self.sealer
            .seal(&binding(step, &context), now_ms().saturating_add(FLOW_TTL_MS), &plain)
            .map_err(|e| GatewayError::internal_caused(format!("cannot seal a {}", step.name()), e))
    }

    /// Opens a step's sealed value and marks it used: a value that does not open (tampered,
    /// expired, another step's) or was used before is refused.
    pub(super) async fn open_flow<T: Flow>(&self, step: Step, sealed: &str) -> Result<T, GatewayError> {
        let context = context_digest(&[step.name().as_bytes()]);
        let plain = self.sealer.open(&binding(step, &context), now_ms(), sealed).map_err(|e| {
            GatewayError::connect_caused(ConnectFailure::InvalidLink, format!("{} does not open", step.name()), e)
        })?;
        // The parser's error is left out: its text may quote the opened value (a PKCE verifier).
        let value: T = serde_json::from_slice(&plain)
            .map_err(|_| GatewayError::connect(ConnectFailure::InvalidLink, format!("{} unreadable", step.name())))?;
        let mark = format!("oauth-{}:{}", step.name(), value.nonce());
        if !self.store.first_use(&mark, now_ms().saturating_add(FLOW_TTL_MS)).await? {
            return Err(GatewayError::connect(ConnectFailure::Used, format!("{} presented again", step.name())));
        }
        Ok(value)
    }
}

fn binding<'a>(step: Step, context: &'a [u8; 32]) -> Binding<'a> {
    Binding { purpose: Purpose::OAuthFlow, principal: "", method: step.name(), context }
}
