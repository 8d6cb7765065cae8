//! A `tools/call`'s tool, looked up at most once per request: the audit (which upstream it
//! belongs to), the policy and the call share what the first of them found. For a caller's own
//! tool of an `auth = "oauth"` upstream that look-up is also the one read of their connection
//! in the vault, whose token the tool found holds for its call (see
//! `mcpgate_upstream`'s `personal_tools`).
//!
//! Invariant: one look-up per request, for the request's principal, in the catalog snapshot
//! of the first use (a catalog swapped in meanwhile is not consulted again).

use std::sync::Arc;

use mcpgate_runtime::Principal;
use mcpgate_runtime::catalog::{Catalog, HeaderParam, Tool};

/// A tool and its mirrored-header parameters.
pub(in crate::mcp) type Found = (Arc<dyn Tool>, Vec<HeaderParam>);

/// The tool a `tools/call` names, found on first use.
pub(in crate::mcp) struct ToolLookup {
    /// `None` until looked up; then what the catalog found (`None`: no such tool for them).
    found: Option<Option<Found>>,
}

impl ToolLookup {
    /// Nothing looked up yet.
    pub(in crate::mcp) fn new() -> Self {
        Self { found: None }
    }

    /// The tool `principal` calls by `name` in `catalog`: looked up the first time, the same
    /// answer after (the name and principal are the request's, unchanged between uses).
    pub(in crate::mcp) async fn find(
        &mut self,
        catalog: &Catalog,
        name: &str,
        principal: &Principal,
    ) -> Option<&Found> {
        if self.found.is_none() {
            // Boxed: a per-principal look-up reads the vault and may read a list upstream; the
            // request's future stays small without it.
            self.found = Some(Box::pin(catalog.find(name, principal)).await);
        }
        self.found.as_ref().and_then(Option::as_ref)
    }
}
