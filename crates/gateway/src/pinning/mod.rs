//! Pinned tool definitions (rug-pull protection): which tools of a pinned upstream a replica
//! serves, decided from the approved hashes in the store (per copy listed: a name listed twice
//! is withheld as a whole), and how a definition is hashed.

mod definition;
mod duplicates;
mod printable;
mod withholding;

pub(crate) use definition::{changed_fields, follows_the_name_rules, omitted};
pub(crate) use duplicates::duplicate_note;
pub(crate) use printable::{printable, shell_word};
pub(crate) use withholding::Pinning;
