//! Pinned tool definitions (rug-pull protection): per pinned upstream, the hash an operator
//! (or, with `first-seen`, the first replica to look) approved for each tool, with the
//! definition it was taken from; and the latest definition seen of each tool whose hash is
//! not the approved one, so an operator can compare the two before approving.
//!
//! Invariant: an approval names the hash the operator saw and takes effect only while that is
//! still the latest seen (a definition that changed again in between is never approved
//! blindly); first-seen seeding happens at most once per upstream, atomically, so two
//! replicas racing end with one approved set; kept definitions and tool counts are bounded,
//! and when the seen set is full, changed tools (those with an approved hash) are kept before
//! new ones. A tool observed with an empty hash (a stub: its definition over the observer's
//! bound, or a name the upstream listed more than once) is never seeded and never approved.

use std::collections::BTreeMap;

/// Most tools approved (or kept as seen) per upstream; beyond it tools stay withheld.
pub const MAX_PINNED_TOOLS: usize = 1024;

/// Most bytes of one kept definition; a longer one is kept as a note saying so (its hash,
/// over the whole definition, still decides).
pub const MAX_DEFINITION_BYTES: usize = 64 * 1024;

/// One tool as an upstream lists it now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Observed {
    /// The upstream's own name of the tool.
    pub tool: String,
    /// SHA-256 (hex) of its canonical definition; empty when the definition is not approvable
    /// (too large to show an operator, or a name listed more than once: `definition` is then
    /// a stub saying so).
    pub hash: String,
    /// Its canonical definition (JSON).
    pub definition: String,
}

/// The approved hash of each tool of one upstream (tool → hash).
pub type Approved = BTreeMap<String, String>;

/// What recording an observation found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observation {
    /// The approved hashes after it.
    pub approved: Approved,
    /// Whether this observation seeded the approved set (first-seen, nothing approved before):
    /// definitions approved without an operator, which the caller reports.
    pub seeded: bool,
}

/// A tool withheld because its latest seen definition is not the approved one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withheld {
    /// The upstream's own name of the tool.
    pub tool: String,
    /// The hash of its latest seen definition (what an approval must name).
    pub hash: String,
    /// Its latest seen definition (JSON, bounded).
    pub definition: String,
    /// The approved hash, if the tool had one (none: a new tool).
    pub approved_hash: Option<String>,
    /// The approved definition (JSON, bounded), if any.
    pub approved_definition: Option<String>,
}

/// What an approval did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// The hash is approved now (or already was).
    Approved,
    /// Not approved: the latest seen definition of the tool has another hash (or none is
    /// withheld under that name).
    Stale {
        /// The latest seen hash, if the tool is withheld.
        current: Option<String>,
    },
    /// Not approved: the upstream has [`MAX_PINNED_TOOLS`] approved tools already.
    Full,
}

/// The definition as kept: itself, or a note when it is over [`MAX_DEFINITION_BYTES`].
pub(crate) fn kept_definition(definition: &str) -> String {
    if definition.len() <= MAX_DEFINITION_BYTES {
        definition.to_owned()
    } else {
        serde_json::json!({ "_omitted": format!("definition of {} bytes, over the kept bound", definition.len()) })
            .to_string()
    }
}
