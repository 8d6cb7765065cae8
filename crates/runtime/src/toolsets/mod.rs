//! Built-in toolsets, selected by name in `toolset`.

mod conformance;
mod demo;

use crate::catalog::CatalogBuilder;
use crate::error::RuntimeError;

/// Toolset names `toolset` accepts.
pub const KNOWN: &[&str] = &["demo", "conformance"];

/// The registrations of the selected toolsets, in the order given.
pub fn registered(names: &[String]) -> Result<CatalogBuilder, RuntimeError> {
    let mut builder = CatalogBuilder::default();
    for name in names {
        match name.as_str() {
            "demo" => demo::install(&mut builder),
            "conformance" => conformance::install(&mut builder),
            other => {
                return Err(RuntimeError::Registration {
                    what: "toolset".to_owned(),
                    problem: format!("unknown toolset {other:?}; known: {}", KNOWN.join(", ")),
                });
            }
        }
    }
    Ok(builder)
}
