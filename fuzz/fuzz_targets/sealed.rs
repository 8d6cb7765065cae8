//! Sealed values as clients send them back (`requestState`, `Mcp-Session-Id`, legacy input
//! request ids): any string must fail to open cleanly unless it is a token sealed for the same
//! binding, and what is sealed opens to itself and to nothing else.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpgate_seal::{Binding, KeyRing, Purpose, Sealer, context_digest};

const NOW: u64 = 1_800_000_000_000;

fuzz_target!(|input: &[u8]| {
    let ring = KeyRing::parse(&[
        "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=",
        "k0:HxweHRwbGhkYFxYVFBMSERAPDg0MCwoJCAcGBQQDAgE=",
    ])
    .expect("a valid key ring");
    let sealer = Sealer::new(ring, 16 * 1024);
    let context = context_digest(&[b"tool", b"echo"]);
    let binding =
        Binding { purpose: Purpose::RequestState, principal: "5:alice", method: "tools/call", context: &context };
    // Arbitrary text presented as a token: opens only if it is one (it never is by chance).
    if let Ok(token) = std::str::from_utf8(input) {
        assert!(sealer.open(&binding, NOW, token).is_err(), "a forged token opened");
    }
    // A real token of these bytes opens to them, and not for another principal or purpose.
    let Ok(token) = sealer.seal(&binding, NOW + 60_000, input) else { return };
    assert_eq!(sealer.open(&binding, NOW, &token).expect("opens"), input);
    let other = Binding { principal: "3:bob", ..binding };
    assert!(sealer.open(&other, NOW, &token).is_err(), "opened for another principal");
    let session = Binding { purpose: Purpose::Session, ..binding };
    assert!(sealer.open(&session, NOW, &token).is_err(), "opened for another purpose");
    assert!(sealer.open(&binding, NOW + 60_001, &token).is_err(), "opened after expiry");
});
