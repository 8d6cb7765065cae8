//! Users' connections to `auth = "oauth"` upstreams, kept by the gateway: each user's tokens
//! sealed in the store's vault, the gateway's client registrations, the connect links users
//! open, the sign-in that proves who opened one, the authorization at the upstream's server,
//! refreshing tokens before they expire, and revoking them when the user disconnects — all of
//! it usable from any replica.
//!
//! Invariant: nothing here lives in a replica's memory that another replica would need: a
//! flow's state travels sealed through the browser (single-use marks in the store), tokens
//! and registrations live sealed in the vault (bound to principal, upstream and issuer), and
//! spending a refresh token or registering a client is done by one replica at a time (a store
//! lock), so a rotating refresh token is never spent twice. A vault value the gateway did not
//! seal (plain, planted) is never used (`vault_value`).

mod authorize;
mod browser;
mod client_source;
mod digest;
mod flow;
mod login;
mod record;
mod redirect;
mod refresh;
mod registration;
mod revocation;
mod seam;
mod stats;
#[cfg(test)]
mod tests;
mod vault_value;

use std::collections::HashMap;
use std::sync::Arc;

use mcpgate_seal::{AtRest, Sealer};
use mcpgate_store::AnyStore;
use mcpgate_upstream::UpstreamConfig;
use mcpgate_upstream::oauth::{AddressPolicy, OAuthClient};

use crate::config::Config;
use crate::error::{GatewayError, StartupError};

pub(crate) use authorize::CallbackParams;
use client_source::ClientSource;
pub(crate) use login::BrowserLogin;
pub(crate) use record::connection_key;
pub(crate) use redirect::CALLBACK_PATH;
pub(crate) use stats::ConnectStats;

/// Paths under `<public_url>`, where browsers are sent.
pub(crate) const CONNECT_PATH: &str = "/oauth/connect";
/// Where the gateway's own issuer sends the user back after signing in.
pub(crate) const LOGIN_CALLBACK_PATH: &str = "/oauth/login/callback";
/// The gateway's Client ID Metadata Document.
pub(crate) const CLIENT_METADATA_PATH: &str = "/oauth/client-metadata.json";

/// One `oauth` upstream as the connector sees it.
#[derive(Debug)]
struct Upstream {
    config: UpstreamConfig,
    oauth: OAuthClient,
}

/// The gateway's side of users' connections (one per replica; every replica's is alike).
#[derive(Debug)]
pub(crate) struct Connector {
    store: AnyStore,
    /// Seals links and flow states.
    sealer: Sealer,
    /// Seals vault values.
    at_rest: AtRest,
    /// `server.public_url` without a trailing `/`.
    public_url: String,
    /// `server.client_metadata_url`, when set (else the document the gateway serves).
    client_metadata_url: Option<String>,
    upstreams: HashMap<String, Upstream>,
    /// The sign-in at the gateway's issuer (`None`: `verify_user = false`).
    login: Option<BrowserLogin>,
    /// Counters.
    pub(crate) stats: ConnectStats,
}

impl Connector {
    /// The connector of a config with `oauth` upstreams (`None` without any).
    pub(crate) fn from_config(
        config: &Config,
        store: AnyStore,
        sealer: &Sealer,
    ) -> Result<Option<Arc<Self>>, StartupError> {
        let oauth: Vec<&UpstreamConfig> = config.upstream.iter().filter(|u| u.is_oauth()).collect();
        if oauth.is_empty() {
            return Ok(None);
        }
        let public_url = config
            .server
            .public_url
            .as_deref()
            .ok_or_else(|| StartupError::config("server.public_url", "required with an oauth upstream"))?
            .trim_end_matches('/')
            .to_owned();
        let mut upstreams = HashMap::new();
        for u in oauth {
            let settings = u.oauth();
            // An upstream without a parsable URL is refused by validation before this.
            let addresses =
                u.url.as_deref().and_then(|url| reqwest::Url::parse(url).ok()).map_or(AddressPolicy::PUBLIC, |url| {
                    AddressPolicy::for_upstream(&url, settings.allow_private_addresses)
                });
            let client = OAuthClient::new(settings.timeout())
                .and_then(|c| c.guarded_by(addresses))
                .map_err(|e| StartupError::step_caused("configuring upstream OAuth", "no HTTP client", e))?
                .pinned_to(settings.issuer);
            upstreams.insert(u.name.clone(), Upstream { config: u.clone(), oauth: client });
        }
        let login = if config.auth.browser_login.verify_user { Some(BrowserLogin::from_config(config)?) } else { None };
        let names: Vec<String> = upstreams.keys().cloned().collect();
        Ok(Some(Arc::new(Self {
            store,
            sealer: sealer.with_max_len(mcpgate_seal::DEFAULT_MAX_TOKEN_LEN),
            at_rest: AtRest::new(sealer, true),
            public_url,
            client_metadata_url: config.server.client_metadata_url.clone(),
            upstreams,
            login,
            stats: ConnectStats::new(&names),
        })))
    }

    /// Whether `name` is an `oauth` upstream.
    pub(crate) fn knows(&self, name: &str) -> bool {
        self.upstreams.contains_key(name)
    }

    /// `<public_url><path>`.
    pub(crate) fn public(&self, path: &str) -> String {
        format!("{}{path}", self.public_url)
    }

    /// The redirect URIs the gateway's Client ID Metadata Document lists: one per `oauth`
    /// upstream that uses no client registered beforehand (those have their own, registered
    /// by the operator: listing theirs here would let any server send their responses back).
    pub(crate) fn metadata_redirect_uris(&self) -> Vec<String> {
        let mut uris: Vec<String> = self
            .upstreams
            .values()
            .filter(|u| u.config.oauth().client_id.is_none())
            .map(|u| self.public(&redirect::callback_path(&u.config.name, ClientSource::Metadata, "")))
            .collect();
        uris.sort();
        uris
    }

    /// The gateway's client id where Client ID Metadata Documents are accepted, if it has one:
    /// `server.client_metadata_url`, else the document it serves when the public URL is https
    /// (an authorization server fetches it: an http or loopback URL is of no use to it).
    pub(crate) fn client_metadata_url(&self) -> Option<String> {
        match &self.client_metadata_url {
            Some(url) => Some(url.clone()),
            None => self.public_url.starts_with("https://").then(|| self.public(CLIENT_METADATA_PATH)),
        }
    }
}

/// 128 random bits from the OS, hex: nonces, lock holders.
fn random_hex() -> Result<String, GatewayError> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| GatewayError::internal_caused("no randomness", e))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}
