//! Integration tests of the protocol crate: golden fixtures of both eras, envelope decoding,
//! and property tests that untrusted input never panics the decoder.

mod envelope;
mod golden;
mod list_result;
mod property;
