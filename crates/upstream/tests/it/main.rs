//! Integration tests of the upstream client against stand-in servers on loopback.

mod discovery;
mod stand_in;
