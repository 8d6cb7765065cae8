//! mcpgate as an OAuth 2.1 client of protected upstreams, on behalf of each of its users (the
//! client side of the MCP authorization spec): reading an upstream's `Bearer` challenge,
//! discovering its authorization server, and PKCE. The flows that use these (connecting a
//! user, redeeming and refreshing tokens kept sealed in the store) build on them.

mod challenge;
mod discovery;
mod pkce;

pub use challenge::BearerChallenge;
pub use discovery::{
    ResourceMetadata, ServerMetadata, check_resource, check_response_issuer, check_server, resource_metadata_urls,
    scopes_to_request, server_metadata_urls,
};
pub use pkce::Pkce;
