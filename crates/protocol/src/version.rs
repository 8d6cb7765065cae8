//! Protocol revisions this gateway speaks, the era each belongs to, and legacy negotiation.
//!
//! Invariant: an era is a property of one request, derived from what that request carries;
//! nothing here remembers a previous request.

use std::fmt;

/// A protocol revision this crate knows by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProtocolVersion {
    /// 2025-03-26 (legacy; plain tools only).
    V2025_03_26,
    /// 2025-06-18 (legacy; plain tools only).
    V2025_06_18,
    /// 2025-11-25 (legacy; `initialize` handshake, core tasks).
    V2025_11_25,
    /// 2026-07-28 (modern; per-request `_meta`, no handshake).
    V2026_07_28,
}

/// Which family of rules a request follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2025-11-25 and older: `initialize`, session id, server→client requests.
    Legacy,
    /// 2026-07-28 and newer: stateless, `_meta` on every request, MRTR.
    Modern,
}

impl Era {
    /// A short lowercase label for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Legacy => "legacy",
            Self::Modern => "modern",
        }
    }
}

impl ProtocolVersion {
    /// Every version served, newest first (the order `supported` lists use).
    pub const ALL: [Self; 4] = [Self::V2026_07_28, Self::V2025_11_25, Self::V2025_06_18, Self::V2025_03_26];
    /// The newest modern revision.
    pub const LATEST_MODERN: Self = Self::V2026_07_28;
    /// The newest legacy revision (what `initialize` offers when the client's is unknown).
    pub const LATEST_LEGACY: Self = Self::V2025_11_25;

    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V2025_03_26 => "2025-03-26",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_11_25 => "2025-11-25",
            Self::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parses a wire spelling; `None` for anything this server does not speak.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// The era of this revision.
    pub fn era(self) -> Era {
        match self {
            Self::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// Every supported version as strings, newest first.
    pub fn all_strs() -> [&'static str; 4] {
        Self::ALL.map(Self::as_str)
    }

    /// The version a legacy `initialize` settles on: the client's own when we speak it as a
    /// legacy revision, otherwise our newest legacy revision (the client then decides).
    pub fn negotiate_legacy(requested: &str) -> Self {
        match Self::parse(requested) {
            Some(v) if v.era() == Era::Legacy => v,
            _ => Self::LATEST_LEGACY,
        }
    }

    /// Whether this revision has 2025-11-25 core tasks.
    pub fn has_core_tasks(self) -> bool {
        self == Self::V2025_11_25
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
