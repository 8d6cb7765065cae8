//! Pinned tool definitions (rug-pull protection): which tools of a pinned upstream a replica
//! serves, decided from the approved hashes in the store, and how a definition is hashed.

mod definition;
mod withholding;

pub(crate) use definition::changed_fields;
pub(crate) use withholding::Pinning;
