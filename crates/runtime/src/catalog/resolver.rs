//! Tools a snapshot cannot list for everyone: those a server behind the gateway shows each
//! caller under their own credentials (an `auth = "oauth"` upstream's tools, read with the
//! caller's token). The snapshot registers a stand-in for each such source; a resolver says
//! what a given principal sees instead, and finds a tool of theirs by name for a call or a
//! task run (on any replica, with the task creator's principal).
//!
//! Invariant: what a resolver gives for one principal is never shown to, or run for, another.

use std::sync::Arc;

use crate::catalog::{BoxFuture, Tool};
use crate::principal::Principal;

/// What one principal's `tools/list` holds instead of some stand-ins.
#[derive(Default)]
pub struct PersonalTools {
    /// Each stand-in's name, with the tools listed in its place (in order).
    pub replaced: Vec<(String, Vec<Arc<dyn Tool>>)>,
    /// How long the result may be cached (the shortest of the sources'), if they said.
    pub ttl_ms: Option<u64>,
}

/// Finds and lists the tools a snapshot holds per principal.
pub trait ToolResolver: Send + Sync + 'static {
    /// `principal`'s own tool called `name` (none of the snapshot's own has that name);
    /// `None`: there is none for them.
    fn resolve<'a>(&'a self, name: &'a str, principal: &'a Principal) -> BoxFuture<'a, Option<Arc<dyn Tool>>>;

    /// What `principal`'s tools list shows in place of the stand-ins (a stand-in not named
    /// there stays).
    fn personal<'a>(&'a self, principal: &'a Principal) -> BoxFuture<'a, PersonalTools>;
}
