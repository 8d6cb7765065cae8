//! Where the gateway's client at an authorization server came from, which decides where its
//! secret is found again and which redirect URI its flows use (`redirect`).

use serde::{Deserialize, Serialize};

/// Where a client came from: decides where its secret is found again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum ClientSource {
    /// `[upstream.oauth] client_id`.
    Configured,
    /// The gateway's Client ID Metadata Document (a public client).
    Metadata,
    /// Dynamic registration, kept in the vault.
    Registered,
}
