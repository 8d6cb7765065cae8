//! The `conformance` toolset: the fixtures the official MCP conformance suite
//! (`@modelcontextprotocol/conformance`) calls by name, with the exact content it checks.
//! `test_simple_text` comes first: some scenarios call the first listed tool with no
//! arguments, and the first listed resource is `test://static-text` for the same reason.

mod changes;
mod client_requests;
mod input;
mod prompts;
mod resources;
mod tasks;
mod tools;

use crate::catalog::CatalogBuilder;

/// A 1×1 PNG.
pub(super) const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV.
pub(super) const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// Registers every conformance fixture.
pub(super) fn install(b: &mut CatalogBuilder) {
    tools::install(b);
    input::install(b);
    changes::install(b);
    tasks::install(b);
    prompts::install(b);
    resources::install(b);
    client_requests::install(b);
}
