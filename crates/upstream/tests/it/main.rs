//! Integration tests of the upstream client against stand-in servers on loopback.

mod connections;
mod discovery;
mod oauth_addresses;
mod oauth_requests;
mod oauth_tools;
mod overrides;
mod stand_in;
mod test_connections;
