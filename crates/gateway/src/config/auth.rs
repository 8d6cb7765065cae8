//! The sections of who may call and what protects what they hold: authentication (`[auth]`,
//! `[auth.jwt]`, `[auth.browser_login]`) and the sealing of session ids and requestState
//! (`[seal]`). Each default is declared once, in its `Default` impl.

use serde::{Deserialize, Serialize};

use super::secret::Secret;

/// How callers are authenticated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AuthMode {
    /// Everyone is one anonymous principal (local development).
    #[default]
    None,
    /// Bearer JWTs.
    Jwt,
}

/// `[auth]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// Mode.
    pub mode: AuthMode,
    /// Allow `none` on a public address.
    pub allow_anonymous_non_loopback: bool,
    /// Canonical resource URI of this endpoint.
    pub resource: Option<String>,
    /// Authorization servers for the protected resource metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes advertised.
    pub scopes_supported: Vec<String>,
    /// Scopes required on every token.
    pub required_scopes: Vec<String>,
    /// JWT verification.
    pub jwt: JwtConfig,
    /// How a user opening a connect link proves, at `auth.jwt.issuer`, who they are.
    pub browser_login: BrowserLoginConfig,
}

/// `[auth.browser_login]`: the gateway as an OpenID Connect client of its own issuer
/// (`auth.jwt.issuer`), so whoever opens a connect link signs in there first and is refused
/// unless they are the principal the link was made for.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BrowserLoginConfig {
    /// The gateway's client id at its issuer.
    pub client_id: Option<String>,
    /// Its secret (unset: a public client).
    pub client_secret: Option<Secret>,
    /// Scopes asked for at sign-in.
    pub scopes: Vec<String>,
    /// Whether the sign-in is required. Off, whoever opens a link connects *their* account to
    /// the principal the link was made for.
    pub verify_user: bool,
}

impl Default for BrowserLoginConfig {
    fn default() -> Self {
        Self { client_id: None, client_secret: None, scopes: vec!["openid".to_owned()], verify_user: true }
    }
}

/// `[auth.jwt]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JwtConfig {
    /// Required issuer.
    pub issuer: Option<String>,
    /// Required audience (defaults to `auth.resource`).
    pub audience: Option<String>,
    /// Algorithm allow-list.
    pub algorithms: Vec<String>,
    /// HS256 secrets.
    pub hs256_secrets: Vec<Secret>,
    /// PEM public key files (`path` or `kid=path`).
    pub public_key_files: Vec<String>,
    /// JWKS file.
    pub jwks_file: Option<String>,
    /// JWKS URL.
    pub jwks_url: Option<String>,
    /// Clock skew allowance.
    pub leeway_secs: u64,
    /// Minimum interval between JWKS refreshes.
    pub jwks_refresh_min_secs: u64,
    /// JWKS cache lifetime.
    pub jwks_cache_secs: u64,
}

impl Default for JwtConfig {
    fn default() -> Self {
        Self {
            issuer: None,
            audience: None,
            algorithms: vec!["RS256".to_owned(), "ES256".to_owned(), "EdDSA".to_owned()],
            hs256_secrets: Vec::new(),
            public_key_files: Vec::new(),
            jwks_file: None,
            jwks_url: None,
            leeway_secs: 30,
            jwks_refresh_min_secs: 30,
            jwks_cache_secs: 600,
        }
    }
}

/// `[seal]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SealConfig {
    /// `kid:base64` keys; empty = one random key.
    pub keys: Vec<Secret>,
    /// Session id lifetime.
    pub session_ttl_secs: u64,
    /// requestState lifetime.
    pub request_state_ttl_secs: u64,
    /// Refuse a requestState presented a second time (records each one used in the store).
    pub request_state_single_use: bool,
    /// Longest sealed value.
    pub max_bytes: u64,
}

impl Default for SealConfig {
    fn default() -> Self {
        Self {
            keys: Vec::new(),
            session_ttl_secs: 86_400,
            request_state_ttl_secs: 600,
            request_state_single_use: false,
            max_bytes: mcpgate_seal::DEFAULT_MAX_TOKEN_LEN as u64,
        }
    }
}
