//! The vault's model: secrets the fleet keeps for its users and itself — a user's connection
//! to a protected upstream (their tokens), the gateway's client registration at an
//! authorization server — as opaque values the caller has sealed, each with a version for
//! compare-and-set and metadata in clear for operators.
//!
//! Invariant: the store never sees a secret in clear (values are sealed by the caller, bound to
//! their key); metadata holds nothing secret (issuer, expiry, scopes), so listing an owner's
//! entries never reads a value; every write names the version it replaces, so two replicas
//! refreshing one connection cannot both win.

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VaultKind {
    /// A user's connection to an upstream (scope: the principal; name: the upstream).
    Connection,
    /// The gateway's registration as a client of an authorization server (scope: the
    /// upstream; name: the issuer).
    Registration,
}

impl VaultKind {
    /// Its name in keys.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Connection => "conn",
            Self::Registration => "reg",
        }
    }
}

/// Where an entry is kept.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VaultKey {
    /// What it is.
    pub kind: VaultKind,
    /// Whose (a principal's key, or an upstream's name).
    pub scope: String,
    /// Which (an upstream's name, or an issuer).
    pub name: String,
}

impl VaultKey {
    /// A key.
    pub fn new(kind: VaultKind, scope: &str, name: &str) -> Self {
        Self { kind, scope: scope.to_owned(), name: name.to_owned() }
    }
}

/// An entry as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultEntry {
    /// The sealed value.
    pub value: String,
    /// Metadata in clear (JSON, nothing secret).
    pub meta: String,
    /// Advanced by every write, and never given twice (not even to an entry deleted and
    /// written anew): a compare-and-set on a version read before a delete fails after it.
    pub version: u64,
    /// When it was last written (Unix ms, the store's clock).
    pub updated_ms: u64,
}

/// What a write expects to find.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// No entry (a first connection; a registration made once for the fleet).
    Absent,
    /// The entry at this version (a refresh replacing the tokens it read).
    Version(u64),
    /// Whatever is there (a new connection replacing an old one).
    Any,
}

/// How a write went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Put {
    /// Written; the entry's new version.
    Saved {
        /// Its version now.
        version: u64,
    },
    /// Not written: the entry was not as expected (`None`: absent).
    Conflict {
        /// The version found.
        current: Option<u64>,
    },
}

/// An entry as an operator sees it: no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VaultListing {
    /// Whose.
    pub scope: String,
    /// Which.
    pub name: String,
    /// Metadata in clear.
    pub meta: String,
    /// Its version.
    pub version: u64,
    /// When it was last written (Unix ms).
    pub updated_ms: u64,
}

/// One page of listings, in (scope, name) order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VaultPage {
    /// The listings.
    pub entries: Vec<VaultListing>,
    /// Where the next page starts, if there is one.
    pub next: Option<String>,
}

/// The index member of an entry: scope and name, apart by a byte neither may hold, so one
/// scope's entries sort together.
pub(crate) fn member(scope: &str, name: &str) -> String {
    format!("{scope}\u{0}{name}")
}

/// The scope and name of an index member.
pub(crate) fn split_member(member: &str) -> Option<(&str, &str)> {
    member.split_once('\u{0}')
}

/// Whether a scope or name can be kept (non-empty, no NUL, bounded).
pub(crate) fn valid_part(part: &str) -> bool {
    !part.is_empty() && part.len() <= 2048 && !part.contains('\u{0}')
}
