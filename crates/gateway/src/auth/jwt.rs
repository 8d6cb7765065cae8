//! Bearer JWT verification: algorithm allow-list, issuer, audience, `exp`/`nbf` with leeway,
//! required non-empty `sub`, optional required scopes. Keys come from HS256 secrets, PEM files and a
//! JWKS (file or URL).
//!
//! Invariants: the algorithm is checked against the allow-list before any key is tried, and
//! only keys of that algorithm's family are tried; a token is accepted only by a key whose
//! `kid` matches when both name one.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::http::{HeaderMap, header};
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
use serde::Deserialize;

use super::jwks::{Jwks, NamedKey};
use mcpgate_runtime::Principal;

use super::resource_metadata_url;
use crate::config::Config;
use crate::error::{GatewayError, StartupError};
use mcpgate_runtime::Credential;

/// Verifies bearer tokens.
#[derive(Debug)]
pub(crate) struct JwtAuthenticator {
    validations: HashMap<Algorithm, Validation>,
    static_keys: Vec<NamedKey>,
    jwks: Option<Arc<Jwks>>,
    issuer: String,
    /// The root endpoint's audience: accepted on every endpoint.
    audience: String,
    required_scopes: Vec<String>,
    challenge: String,
}

impl std::fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    aud: Option<Audience>,
    #[serde(default)]
    scope: Option<Scopes>,
    #[serde(default)]
    scp: Option<Scopes>,
}

/// `aud`: one string or an array of them (RFC 7519 4.1.3).
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn names(&self, audience: &str) -> bool {
        match self {
            Self::One(one) => one == audience,
            Self::Many(many) => many.iter().any(|a| a == audience),
        }
    }
}

/// Providers disagree on the shape: OAuth's `scope` is a space-separated string, Entra ID's
/// `scp` is one too, and some send either as an array.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scopes {
    Text(String),
    List(Vec<String>),
}

impl Scopes {
    fn into_vec(self) -> Vec<String> {
        match self {
            Self::Text(s) => s.split_whitespace().map(str::to_owned).collect(),
            Self::List(list) => list,
        }
    }
}

impl JwtAuthenticator {
    /// Builds the verifier from a validated config.
    /// `servers`: the protected resources of the virtual servers, each accepted as a token's
    /// audience on its own endpoint only.
    pub(super) fn from_config(config: &Config, servers: &[String]) -> Result<Self, StartupError> {
        let jwt = &config.auth.jwt;
        let issuer = jwt.issuer.clone().unwrap_or_default();
        let audience = jwt.audience.clone().or_else(|| config.auth.resource.clone()).unwrap_or_default();
        let mut audiences = vec![audience.as_str()];
        audiences.extend(servers.iter().map(String::as_str));
        let mut validations = HashMap::new();
        for name in &jwt.algorithms {
            let alg: Algorithm = name.parse().map_err(|e| {
                StartupError::config_caused("auth.jwt.algorithms", format!("unknown algorithm {name:?}"), e)
            })?;
            let mut v = Validation::new(alg);
            v.set_issuer(&[&issuer]);
            v.set_audience(&audiences);
            v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
            v.leeway = jwt.leeway_secs;
            v.validate_nbf = true;
            validations.insert(alg, v);
        }

        let mut static_keys = Vec::new();
        for secret in &jwt.hs256_secrets {
            static_keys.push(NamedKey { kid: None, key: DecodingKey::from_secret(secret.expose().as_bytes()) });
        }
        for spec in &jwt.public_key_files {
            static_keys.push(load_pem(spec)?);
        }
        let min = Duration::from_secs(jwt.jwks_refresh_min_secs);
        let lifetime = Duration::from_secs(jwt.jwks_cache_secs.max(1));
        let jwks = match (&jwt.jwks_file, &jwt.jwks_url) {
            (Some(_), Some(_)) => {
                return Err(StartupError::config("auth.jwt.jwks_url", "set either jwks_file or jwks_url, not both"));
            }
            (Some(path), None) => Some(Arc::new(Jwks::file(path, min, lifetime)?)),
            (None, Some(url)) => Some(Arc::new(Jwks::url(url, min, lifetime)?)),
            (None, None) => None,
        };

        let metadata = config.auth.resource.as_deref().map(resource_metadata_url);
        let mut challenge = String::from("Bearer");
        if let Some(url) = &metadata {
            challenge.push_str(&format!(" resource_metadata=\"{url}\""));
        }
        if !config.auth.required_scopes.is_empty() {
            let sep = if metadata.is_some() { "," } else { "" };
            challenge.push_str(&format!("{sep} scope=\"{}\"", config.auth.required_scopes.join(" ")));
        }
        Ok(Self {
            validations,
            static_keys,
            jwks,
            issuer,
            audience,
            required_scopes: config.auth.required_scopes.clone(),
            challenge,
        })
    }

    /// Authenticates one request's `Authorization` header, sent to the virtual server whose
    /// protected resource is `server` (`None`: the root endpoint, or a route of no server). A
    /// token for one server is refused on every other endpoint; the root's audience holds on
    /// every endpoint.
    pub(super) async fn authenticate(
        &self,
        headers: &HeaderMap,
        server: Option<&str>,
    ) -> Result<Principal, GatewayError> {
        let Some(value) = headers.get(header::AUTHORIZATION) else {
            return Err(self.unauthorized("missing bearer token", None));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, t)| t.trim())
            .filter(|t| !t.is_empty())
            .ok_or_else(|| self.unauthorized("expected `Authorization: Bearer <token>`", Some("invalid_request")))?;

        let head = decode_header(token).map_err(|_| self.invalid("malformed token"))?;
        let validation = self.validations.get(&head.alg).ok_or_else(|| self.invalid("token algorithm not allowed"))?;
        let family = head.alg.family();
        let kid = head.kid.as_deref();

        let mut outcome = self.try_keys(token, validation, family, kid, &self.static_keys);
        // A static key's signature mismatch may just mean the token was signed by a JWKS key.
        if let Some(jwks) = &self.jwks
            && outcome.may_match_another_key()
        {
            let keys = jwks.keys().await;
            outcome = outcome.or(self.try_keys(token, validation, family, kid, &keys));
            let kid_unknown = kid.is_some_and(|k| !keys.iter().any(|key| key.kid.as_deref() == Some(k)));
            if outcome.may_match_another_key() && kid_unknown {
                let keys = jwks.refresh_for_unknown_kid().await;
                outcome = outcome.or(self.try_keys(token, validation, family, kid, &keys));
            }
        }
        let all = match outcome {
            Attempt::Valid(all) => all,
            Attempt::NoKey => return Err(self.invalid("no key matches the token")),
            Attempt::Invalid(kind) => return Err(self.invalid(reason(&kind))),
        };
        // Every claim is kept for policy rules; the ones the gateway itself uses are read here.
        let all = serde_json::Value::Object(all);
        let claims = Claims::deserialize(&all).map_err(|_| self.invalid("token claims are malformed"))?;
        let serde_json::Value::Object(all) = all else { unreachable!("built as an object above") };

        // The validation accepted any endpoint's audience; this endpoint takes its own and the root's.
        if !claims.aud.as_ref().is_some_and(|aud| aud.names(&self.audience) || server.is_some_and(|s| aud.names(s))) {
            return Err(self.invalid(reason(&ErrorKind::InvalidAudience)));
        }
        // An empty subject names nobody: every such token would share one principal (and its
        // tasks, sessions and quotas).
        if claims.sub.trim().is_empty() {
            return Err(self.invalid("token subject is empty"));
        }
        let scopes = claims.scope.or(claims.scp).map(Scopes::into_vec).unwrap_or_default();
        if !self.required_scopes.iter().all(|r| scopes.contains(r)) {
            return Err(GatewayError::InsufficientScope {
                challenge: format!("{}, error=\"insufficient_scope\"", self.challenge),
            });
        }
        // The token rides along (never shown, never forwarded) for upstreams that exchange it.
        Ok(Principal::with_credential(&self.issuer, &claims.sub, scopes, Some(Credential::bearer(token)))
            .with_claims(all))
    }

    fn try_keys(
        &self,
        token: &str,
        validation: &Validation,
        family: jsonwebtoken::AlgorithmFamily,
        kid: Option<&str>,
        keys: &[NamedKey],
    ) -> Attempt {
        let mut outcome = Attempt::NoKey;
        for candidate in keys {
            if candidate.key.family() != family {
                continue;
            }
            if let (Some(want), Some(have)) = (kid, candidate.kid.as_deref())
                && want != have
            {
                continue;
            }
            match decode::<serde_json::Map<String, serde_json::Value>>(token, &candidate.key, validation) {
                Ok(data) => return Attempt::Valid(data.claims),
                // A signature mismatch may mean "another of our keys"; any other failure is
                // about the token itself and is final.
                Err(e) if matches!(e.kind(), ErrorKind::InvalidSignature) => outcome = Attempt::Invalid(e.into_kind()),
                Err(e) => return Attempt::Invalid(e.into_kind()),
            }
        }
        outcome
    }

    fn invalid(&self, reason: &str) -> GatewayError {
        self.unauthorized(reason, Some("invalid_token"))
    }

    fn unauthorized(&self, reason: &str, error: Option<&str>) -> GatewayError {
        let mut challenge = self.challenge.clone();
        if let Some(error) = error {
            let sep = if challenge == "Bearer" { " " } else { ", " };
            challenge.push_str(&format!("{sep}error=\"{error}\", error_description=\"{reason}\""));
        }
        GatewayError::Unauthorized { reason: reason.to_owned(), challenge }
    }
}

enum Attempt {
    Valid(serde_json::Map<String, serde_json::Value>),
    NoKey,
    Invalid(ErrorKind),
}

impl Attempt {
    /// Nothing matched, or only keys whose signature did not fit: another key source may.
    fn may_match_another_key(&self) -> bool {
        matches!(self, Self::NoKey | Self::Invalid(ErrorKind::InvalidSignature))
    }

    /// The better of two attempts: a valid token, else the more specific failure.
    fn or(self, other: Self) -> Self {
        match (self, other) {
            (Self::Valid(c), _) | (_, Self::Valid(c)) => Self::Valid(c),
            (first, Self::NoKey) => first,
            (_, second) => second,
        }
    }
}

fn reason(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "token expired",
        ErrorKind::ImmatureSignature => "token not yet valid",
        ErrorKind::InvalidAudience => "token audience does not match this resource",
        ErrorKind::InvalidIssuer => "token issuer is not trusted",
        ErrorKind::InvalidSignature => "token signature is invalid",
        ErrorKind::MissingRequiredClaim(_) => "token lacks a required claim (exp, iss, aud, sub)",
        ErrorKind::InvalidAlgorithm => "token algorithm not allowed",
        _ => "token is invalid",
    }
}

fn load_pem(spec: &str) -> Result<NamedKey, StartupError> {
    let (kid, path) = match spec.split_once('=') {
        Some((kid, path)) => (Some(kid.trim().to_owned()), path.trim()),
        None => (None, spec.trim()),
    };
    let what = || format!("loading auth.jwt.public_key_files entry {path}");
    let pem = std::fs::read(path).map_err(|e| StartupError::step_caused(what(), "cannot read it", e))?;
    let key = DecodingKey::from_rsa_pem(&pem)
        .or_else(|_| DecodingKey::from_ec_pem(&pem))
        .or_else(|_| DecodingKey::from_ed_pem(&pem))
        .map_err(|_| StartupError::step(what(), "not an RSA, EC or Ed25519 public key in PEM form"))?;
    Ok(NamedKey { kid, key })
}
