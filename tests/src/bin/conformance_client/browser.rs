//! The user's browser, without one: opens a connect link and follows its redirects through the
//! suite's authorization server and back to the gateway's callback.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use reqwest::Url;
use reqwest::header::{COOKIE, HeaderMap, LOCATION, SET_COOKIE};

use crate::setup::PUBLIC_URL;

/// Most redirects one opened link may take (gateway → authorization server → gateway).
const MAX_HOPS: usize = 10;

/// The user's browser, without one: follows redirects by hand, sends what is under
/// `PUBLIC_URL` to the gateway's loopback address (as a TLS-terminating proxy would), keeps the
/// gateway's cookies. The suite's authorization server approves at once (no login page).
pub(super) struct Browser {
    http: reqwest::Client,
    /// The gateway's `host:port`.
    gateway: String,
    /// Cookies the gateway set (name → value; attributes are not needed here).
    cookies: BTreeMap<String, String>,
}

impl Browser {
    pub(super) fn new(gateway: &str) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(10))
            .build()
            .context("building the user agent")?;
        Ok(Self { http, gateway: gateway.to_owned(), cookies: BTreeMap::new() })
    }

    /// Opens `link` and follows its redirects to a page; fails unless that page is a 2xx.
    pub(super) async fn open(&mut self, link: &str) -> anyhow::Result<()> {
        let mut at = Url::parse(link).context("the connect link is not a URL")?;
        for _ in 0..MAX_HOPS {
            let gateway = at.as_str().strip_prefix(PUBLIC_URL).filter(|rest| rest.starts_with('/'));
            let target = gateway.map_or_else(|| at.to_string(), |rest| format!("http://{}{rest}", self.gateway));
            let mut request = self.http.get(&target);
            if gateway.is_some() && !self.cookies.is_empty() {
                let jar: Vec<String> = self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect();
                request = request.header(COOKIE, jar.join("; "));
            }
            // Shown without its query: it carries codes and sealed state.
            let shown = format!("{}{}", at.origin().ascii_serialization(), at.path());
            let response = request.send().await.with_context(|| format!("GET {shown}"))?;
            if gateway.is_some() {
                self.keep_cookies(response.headers());
            }
            let status = response.status();
            if status.is_redirection() {
                let location = response.headers().get(LOCATION).and_then(|v| v.to_str().ok());
                let location = location.with_context(|| format!("{shown}: HTTP {status} without a Location"))?;
                at = at.join(location).with_context(|| format!("{shown}: a Location that is not a URL"))?;
                continue;
            }
            let page: String = response.text().await.unwrap_or_default().chars().take(500).collect();
            ensure!(status.is_success(), "{shown} answered HTTP {status}: {page}");
            return Ok(());
        }
        bail!("more than {MAX_HOPS} redirects")
    }

    fn keep_cookies(&mut self, headers: &HeaderMap) {
        for value in headers.get_all(SET_COOKIE).iter().filter_map(|v| v.to_str().ok()) {
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                self.cookies.insert(name.trim().to_owned(), value.trim().to_owned());
            }
        }
    }
}
