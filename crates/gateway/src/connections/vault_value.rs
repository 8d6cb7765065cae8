//! Opening the vault's sealed values (users' connections, the gateway's registrations): a
//! value is used only in the current sealed format, bound to the key it was read from.
//!
//! Threat model: someone who can write to the store but holds no key. Every release that
//! wrote the vault sealed its values (`AtRest::seal_always`, the current format, bound to
//! the record's principal, upstream and issuer), so a value in any other form — plain JSON,
//! the older at-rest format — was planted. Opened as it is, a planted connection would run a
//! user's calls on its planter's account (the account swap `verify_user` exists to prevent)
//! and POST its refresh token to the token endpoint it names; a planted registration would
//! swap the gateway's client at an authorization server. So such a value counts as absent:
//! logged (never any of its content), counted in
//! `mcpgate_oauth_vault_records_refused_total`, never parsed, used or sent anywhere. Left
//! open: deleting a record (the user is asked to connect again), restoring an older sealed
//! value of the same record (its tokens were the user's own), and the metadata in clear.

use mcpgate_seal::{AtRest, AtRestFormat, RecordBinding};

use super::Connector;

/// Which kind of vault record a value belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum VaultRecord {
    /// A user's connection (tokens).
    Connection,
    /// The gateway's registration at an authorization server (its client).
    Registration,
}

impl VaultRecord {
    /// Every kind, in the order metrics list them.
    pub(crate) const ALL: [Self; 2] = [Self::Connection, Self::Registration];

    /// Its label in logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Connection => "connection",
            Self::Registration => "registration",
        }
    }

    /// The record id its values are sealed as (and bound to).
    pub(super) const fn record_id(self) -> &'static str {
        match self {
            Self::Connection => "oauth-connection",
            Self::Registration => "oauth-registration",
        }
    }
}

/// Why a vault value was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not in the current sealed format (plain, or the older at-rest format): planted.
    NotSealed,
    /// Sealed, but it does not open here (tampered, bound to another key, or sealed with a
    /// key no longer in the ring).
    DoesNotOpen,
    /// It opens, but what it holds is unreadable or contradicts its metadata.
    Unreadable,
}

impl Refused {
    /// Every reason, in the order metrics list them.
    pub(crate) const ALL: [Self; 3] = [Self::NotSealed, Self::DoesNotOpen, Self::Unreadable];

    /// Its label in logs and metrics.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::NotSealed => "not_sealed",
            Self::DoesNotOpen => "does_not_open",
            Self::Unreadable => "unreadable",
        }
    }
}

impl Connector {
    /// The plaintext of `stored`, a value of a `record` bound by `binding`, sealed as `field`:
    /// only if it is in the current sealed format and opens for exactly that binding.
    pub(super) fn open_vault_value(
        &self,
        record: VaultRecord,
        binding: &RecordBinding,
        field: &str,
        stored: String,
    ) -> Result<String, (Refused, &'static str)> {
        if AtRest::format(&stored) != AtRestFormat::Current {
            return Err((Refused::NotSealed, "not sealed in the current format"));
        }
        // A fixed label, not the error: it is a log field beside the refusal's reason (the
        // seal's failures are a closed set; nothing of the value is in it).
        self.at_rest
            .open(record.record_id(), binding, field, stored)
            .map_err(|e| (Refused::DoesNotOpen, e.open_failure().map_or("does not open", |f| f.as_str())))
    }

    /// Logs (without any of the value) and counts a value of `record` of `upstream` that was
    /// not used.
    pub(super) fn refused_vault_value(&self, record: VaultRecord, upstream: &str, (why, detail): (Refused, &str)) {
        self.stats.vault_refused(upstream, record, why);
        tracing::warn!(
            upstream = %upstream,
            record = record.as_str(),
            reason = why.as_str(),
            detail,
            "a vault record was not used (counts as absent)"
        );
    }
}
