//! What every catalog snapshot is built from: the built-in toolsets, the upstreams' entries,
//! the embedder's extra entries, then the background-task companions.
//!
//! Invariant: a snapshot is a pure function of these parts and the upstreams' lists, so every
//! replica with the same lists serves the same catalog.

use mcpgate_runtime::catalog::{Catalog, CatalogBuilder, ListRendering};
use mcpgate_upstream::{Federation, Lists};

use crate::config::BackgroundConfig;
use crate::error::StartupError;
use crate::tasks::TaskBook;

/// The fixed parts of every snapshot.
#[derive(Clone)]
pub(crate) struct CatalogParts {
    /// Registrations of the configured toolsets.
    pub toolsets: CatalogBuilder,
    /// Registrations added by an embedder (after the upstreams').
    pub extra: CatalogBuilder,
    /// How lists are rendered.
    pub rendering: ListRendering,
    /// The background-task companions' names.
    pub background: BackgroundConfig,
}

impl std::fmt::Debug for CatalogParts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CatalogParts").finish_non_exhaustive()
    }
}

impl CatalogParts {
    /// Every entry with these upstream lists, before the companions (which are never tasks).
    pub(crate) fn assemble(&self, federation: &Federation, lists: &[Option<Lists>]) -> CatalogBuilder {
        let mut builder = self.toolsets.clone();
        federation.register(&mut builder, lists);
        builder.append(self.extra.clone());
        builder
    }

    /// A snapshot with these upstream lists; the companions read and cancel tasks in `book`.
    pub(crate) fn build(
        &self,
        federation: &Federation,
        lists: &[Option<Lists>],
        book: &TaskBook,
    ) -> Result<Catalog, StartupError> {
        let mut builder = self.assemble(federation, lists);
        let fixed = |name: &str| self.toolsets.has_tool(name) || self.extra.has_tool(name);
        crate::tasks::companions::register(&mut builder, book, &self.background, fixed)?;
        Ok(builder.build(&self.rendering)?)
    }
}
