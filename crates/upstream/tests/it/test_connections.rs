//! A test double of the `Connections` seam: an in-memory map of principal key → access token,
//! the token a refresh would give, and a record of every refusal reported.

use std::collections::HashMap;
use std::sync::Mutex;

use mcpgate_runtime::catalog::BoxFuture;
use mcpgate_runtime::{Credential, Principal};
use mcpgate_upstream::UpstreamError;
use mcpgate_upstream::oauth::{BearerChallenge, Connections, HeldToken, Refusal};

/// One refusal reported: (principal key, the stale token, why, the challenge).
pub(crate) type Reported = (String, String, Refusal, Option<BearerChallenge>);

#[derive(Debug, Default)]
pub(crate) struct TestConnections {
    tokens: Mutex<HashMap<String, String>>,
    refreshes: Mutex<HashMap<String, String>>,
    refusals: Mutex<Vec<Reported>>,
    asked: Mutex<u32>,
}

impl TestConnections {
    /// `principal` holds a connection whose access token is `token`.
    pub(crate) fn connect(&self, principal: &Principal, token: &str) {
        self.tokens.lock().unwrap().insert(principal.key().to_owned(), token.to_owned());
    }

    /// A refresh of `principal`'s connection gives `token` (without one, a refresh is refused).
    pub(crate) fn refreshes_to(&self, principal: &Principal, token: &str) {
        self.refreshes.lock().unwrap().insert(principal.key().to_owned(), token.to_owned());
    }

    /// Every refusal reported so far.
    pub(crate) fn refusals(&self) -> Vec<Reported> {
        self.refusals.lock().unwrap().clone()
    }

    /// The connect link the double hands `principal` for `upstream`.
    pub(crate) fn link(upstream: &str, principal: &Principal) -> String {
        format!("https://gateway.example/oauth/connect/{upstream}-{}", principal.subject())
    }

    fn required(&self, upstream: &str, principal: &Principal) -> UpstreamError {
        let mut asked = self.asked.lock().unwrap();
        *asked += 1;
        UpstreamError::ConnectionRequired {
            upstream: upstream.to_owned(),
            url: Self::link(upstream, principal),
            elicitation_id: format!("connect-{}-{asked}", principal.subject()),
        }
    }
}

impl Connections for TestConnections {
    fn bearer<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(async move {
            let token = self.tokens.lock().unwrap().get(principal.key()).cloned();
            token.map(|t| Credential::bearer(&t)).ok_or_else(|| self.required(upstream, principal))
        })
    }

    fn lookup<'a>(
        &'a self,
        _upstream: &'a str,
        principal: &'a Principal,
    ) -> BoxFuture<'a, Result<Option<HeldToken>, UpstreamError>> {
        Box::pin(async move {
            let token = self.tokens.lock().unwrap().get(principal.key()).cloned();
            Ok(token.map(|t| HeldToken::new(Credential::bearer(&t), None)))
        })
    }

    fn refused<'a>(
        &'a self,
        upstream: &'a str,
        principal: &'a Principal,
        stale: &'a Credential,
        refusal: Refusal,
        challenge: Option<&'a BearerChallenge>,
    ) -> BoxFuture<'a, Result<Credential, UpstreamError>> {
        Box::pin(async move {
            let key = principal.key().to_owned();
            self.refusals.lock().unwrap().push((key.clone(), stale.expose().to_owned(), refusal, challenge.cloned()));
            if refusal == Refusal::Forbidden {
                return Err(self.required(upstream, principal));
            }
            if refusal == Refusal::StillUnauthorized {
                self.tokens.lock().unwrap().remove(&key);
                return Err(self.required(upstream, principal));
            }
            match self.refreshes.lock().unwrap().remove(&key) {
                Some(fresh) => {
                    self.tokens.lock().unwrap().insert(key, fresh.clone());
                    Ok(Credential::bearer(&fresh))
                }
                None => {
                    self.tokens.lock().unwrap().remove(&key);
                    Err(self.required(upstream, principal))
                }
            }
        })
    }
}
