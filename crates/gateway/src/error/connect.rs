//! Why a step of connecting a user's account at an upstream (a browser route under `/oauth/`)
//! failed, and the page text the user is told for each (never the detail, which is logged).

/// Why a step of connecting a user's account at an upstream (in their browser) failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectFailure {
    /// A link or `state` that does not open: tampered, expired, or not the gateway's.
    InvalidLink,
    /// A link or `state` presented a second time.
    Used,
    /// The user who signed in is not the one the link was made for.
    WrongUser,
    /// A callback reached a browser other than the one that opened the link (a forwarded URL).
    OtherBrowser,
    /// The user (or a server) declined the authorization.
    Denied,
    /// No such `oauth` upstream, or no connection to it.
    NotFound,
    /// The upstream's authorization server (or the gateway's issuer) could not be used.
    AuthorizationServer,
    /// An authorization came back at the redirect URI of another upstream or authorization
    /// server than its `state` was sent to (a mix-up, RFC 9700 §4.4): its code is not redeemed.
    WrongServer,
    /// An authorization came back at `/oauth/callback`, the single redirect URI of earlier
    /// releases, which names no upstream or server.
    RetiredCallback,
}

impl ConnectFailure {
    /// What the user is told (never the detail, which goes to the log).
    pub fn message(self) -> &'static str {
        match self {
            Self::InvalidLink => {
                "This link is not valid or has expired. Call the tool again in your client to get a new one."
            }
            Self::Used => "This link has been used already. Call the tool again in your client to get a new one.",
            Self::WrongUser => {
                "You signed in as someone other than the user this link was made for. Nothing was connected."
            }
            Self::OtherBrowser => {
                "This page belongs to a connection started in another browser. Nothing was connected. Open the \
                 link your client gave you in this browser."
            }
            Self::Denied => "The authorization was not granted. Nothing was connected.",
            Self::NotFound => "Not found.",
            Self::AuthorizationServer => {
                "The authorization server could not be used right now. Nothing was connected; try again later."
            }
            Self::WrongServer => {
                "This authorization came back from another server than the one it was sent to. Nothing was \
                 connected. Call the tool again in your client to get a new link."
            }
            Self::RetiredCallback => {
                "This return address is no longer used (the gateway now has one per upstream and server). Nothing \
                 was connected. Call the tool again in your client to get a new link."
            }
        }
    }
}
