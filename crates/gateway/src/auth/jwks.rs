//! A JWKS source (file or URL) with a cache: keys are used until the cache lifetime ends, and
//! a token naming an unknown `kid` triggers a refresh, at most once per refresh interval and
//! one at a time, so random `kid`s cannot turn the gateway into a request amplifier.
//!
//! Invariant: a failed refresh keeps the last good key set.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::{JwkSet, PublicKeyUse};
use tokio::sync::{Mutex, RwLock};
use tokio::time::Instant;

use crate::error::StartupError;

/// Largest JWKS document accepted.
const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// A verification key and the id it is published under.
#[derive(Clone)]
pub(super) struct NamedKey {
    pub(super) kid: Option<String>,
    pub(super) key: DecodingKey,
}

#[derive(Debug)]
enum Location {
    File(PathBuf),
    Url { url: String, client: reqwest::Client },
}

struct Cached {
    keys: Arc<Vec<NamedKey>>,
    fetched_at: Option<Instant>,
    attempted_at: Option<Instant>,
}

/// A cached JWKS.
pub(super) struct Jwks {
    location: Location,
    cache: RwLock<Cached>,
    refreshing: Mutex<()>,
    refreshing_in_background: AtomicBool,
    min_interval: Duration,
    lifetime: Duration,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jwks").field("location", &self.location).finish_non_exhaustive()
    }
}

impl Jwks {
    /// A JWKS read from a file; the file is read now, so a missing file fails start-up.
    pub(super) fn file(path: &str, min_interval: Duration, lifetime: Duration) -> Result<Self, StartupError> {
        let path = PathBuf::from(path);
        let keys = read_file(&path).map_err(|e| {
            StartupError::step_caused(format!("reading auth.jwt.jwks_file {}", path.display()), "no usable JWKS", e)
        })?;
        Ok(Self::with(Location::File(path), keys, Some(Instant::now()), min_interval, lifetime))
    }

    /// A JWKS fetched from a URL on first use.
    pub(super) fn url(url: &str, min_interval: Duration, lifetime: Duration) -> Result<Self, StartupError> {
        install_tls_provider();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(10))
            .redirect(redirect_policy())
            .build()
            .map_err(|e| {
                StartupError::step_caused("building the JWKS HTTP client", "reqwest refused its settings", e)
            })?;
        Ok(Self::with(Location::Url { url: url.to_owned(), client }, Vec::new(), None, min_interval, lifetime))
    }

    fn with(
        location: Location,
        keys: Vec<NamedKey>,
        fetched_at: Option<Instant>,
        min_interval: Duration,
        lifetime: Duration,
    ) -> Self {
        Self {
            location,
            cache: RwLock::new(Cached { keys: Arc::new(keys), fetched_at, attempted_at: None }),
            refreshing: Mutex::new(()),
            refreshing_in_background: AtomicBool::new(false),
            min_interval,
            lifetime,
        }
    }

    /// The current keys. Before the first successful fetch the fetch happens inline (there is
    /// nothing to verify with yet); once the cache lifetime has ended the old keys keep being
    /// served while one background task fetches new ones, so authentication never waits on
    /// the identity provider.
    pub(super) async fn keys(self: &Arc<Self>) -> Arc<Vec<NamedKey>> {
        let (never, stale) = {
            let cache = self.cache.read().await;
            (cache.fetched_at.is_none(), cache.fetched_at.is_some_and(|at| at.elapsed() >= self.lifetime))
        };
        if never {
            self.refresh().await;
        } else if stale && !self.refreshing_in_background.swap(true, Ordering::AcqRel) {
            let this = self.clone();
            tokio::spawn(async move {
                this.refresh().await;
                this.refreshing_in_background.store(false, Ordering::Release);
            });
        }
        self.cache.read().await.keys.clone()
    }

    /// Refreshes because a token named a key we do not have; rate-limited.
    pub(super) async fn refresh_for_unknown_kid(&self) -> Arc<Vec<NamedKey>> {
        self.refresh().await;
        self.cache.read().await.keys.clone()
    }

    async fn refresh(&self) {
        let _one_at_a_time = self.refreshing.lock().await;
        {
            let cache = self.cache.read().await;
            if cache.attempted_at.is_some_and(|at| at.elapsed() < self.min_interval) {
                return;
            }
        }
        let now = Instant::now();
        let result = match &self.location {
            Location::File(path) => read_file(path),
            Location::Url { url, client } => fetch(client, url).await,
        };
        let mut cache = self.cache.write().await;
        cache.attempted_at = Some(now);
        match result {
            Ok(keys) => {
                tracing::info!(keys = keys.len(), "JWKS refreshed");
                cache.keys = Arc::new(keys);
                cache.fetched_at = Some(now);
            }
            Err(e) => {
                tracing::warn!(error = &e as &dyn std::error::Error, "JWKS refresh failed; keeping the previous keys")
            }
        }
    }
}

/// Why a key set could not be read (logged, or the cause of a start-up error; a JWKS holds
/// public keys only, so no cause quotes a secret).
#[derive(Debug, thiserror::Error)]
enum JwksError {
    /// The file does not open.
    #[error("cannot be read")]
    Read(#[source] std::io::Error),
    /// The document (file or response body) is too large.
    #[error("larger than {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    /// The request failed, or its body broke off.
    #[error("GET {url}")]
    Get {
        /// The JWKS URL.
        url: String,
        /// What the HTTP client said.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an error status.
    #[error("GET {url}: HTTP {status}")]
    Status {
        /// The JWKS URL.
        url: String,
        /// Its status.
        status: reqwest::StatusCode,
    },
    /// The document does not decode as a JWKS.
    #[error("not a JWKS document")]
    NotJwks(#[source] serde_json::Error),
}

fn read_file(path: &PathBuf) -> Result<Vec<NamedKey>, JwksError> {
    let bytes = std::fs::read(path).map_err(JwksError::Read)?;
    if bytes.len() > MAX_JWKS_BYTES {
        return Err(JwksError::TooLarge);
    }
    parse(&bytes)
}

async fn fetch(client: &reqwest::Client, url: &str) -> Result<Vec<NamedKey>, JwksError> {
    let failed = |source| JwksError::Get { url: url.to_owned(), source };
    let mut response = client.get(url).send().await.map_err(failed)?;
    if !response.status().is_success() {
        return Err(JwksError::Status { url: url.to_owned(), status: response.status() });
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(failed)? {
        if body.len() + chunk.len() > MAX_JWKS_BYTES {
            return Err(JwksError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    parse(&body)
}

fn parse(bytes: &[u8]) -> Result<Vec<NamedKey>, JwksError> {
    let set: JwkSet = serde_json::from_slice(bytes).map_err(JwksError::NotJwks)?;
    let mut keys = Vec::with_capacity(set.keys.len());
    for jwk in &set.keys {
        if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption)) {
            continue;
        }
        match DecodingKey::from_jwk(jwk) {
            Ok(key) => keys.push(NamedKey { kid: jwk.common.key_id.clone(), key }),
            Err(e) => {
                tracing::warn!(kid = ?jwk.common.key_id, error = &e as &dyn std::error::Error, "skipping unusable JWK")
            }
        }
    }
    Ok(keys)
}

/// Redirects are followed (at most 3) only to `https` URLs: a redirect to plain HTTP would let
/// anyone on the path between us and that URL hand us keys to accept their own tokens with.
fn redirect_policy() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        if attempt.previous().len() > 3 {
            attempt.error("more than 3 redirects")
        } else if attempt.url().scheme() != "https" {
            let scheme = attempt.url().scheme().to_owned();
            attempt.error(format!("a redirect to a non-https ({scheme}) URL is not followed"))
        } else {
            attempt.follow()
        }
    })
}

/// reqwest is built without a bundled TLS crypto provider; install ring once per process.
fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
