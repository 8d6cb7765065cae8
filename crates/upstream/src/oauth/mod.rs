//! mcpgate as an OAuth 2.1 client of protected upstreams, on behalf of each of its users (the
//! client side of the MCP authorization spec): reading an upstream's `Bearer` challenge,
//! discovering its authorization server, registering with it, the authorization URL with
//! PKCE, redeeming codes and refresh tokens, and revoking tokens (RFC 7009). Connecting users
//! and keeping their tokens sealed in the store build on these.
//!
//! Layering: beneath `transport` (which reads an upstream's refusal through
//! [`BearerChallenge`]) and `config`; imports neither, only `error` and `tls` below it. Its
//! requests go through its own guarded clients, never an upstream's transport.

mod address;
mod challenge;
mod client;
mod connections;
mod discovery;
pub(crate) mod endpoint;
mod pkce;
mod revocation;
mod tokens;

pub use address::AddressPolicy;
pub use challenge::BearerChallenge;
pub use client::{ClientAuth, ClientRegistration, Discovered, OAuthClient, authorization_url};
pub(crate) use connections::refused;
pub use connections::{Connections, HeldToken, Refusal};
pub use discovery::{
    ResourceMetadata, ServerMetadata, check_resource, check_response_issuer, check_server, pick_issuer,
    resource_metadata_urls, scopes_to_request, secure_url, server_metadata_urls,
};
pub use pkce::Pkce;
pub use revocation::TokenKind;
pub use tokens::TokenSet;
