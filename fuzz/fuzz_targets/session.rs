//! Opening a legacy `Mcp-Session-Id`: whatever a session id holds once it opens (here any
//! bytes, sealed for the right principal, as only a key holder could), opening it either
//! gives a session that seals and opens again to the same thing, or "session not found"; it
//! never panics. Ids that do not open for the caller are "session not found".
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcpgate::GatewayError;
use mcpgate::internals::{Metrics, now_ms, session};
use mcpgate_runtime::Principal;
use mcpgate_seal::{Binding, KeyRing, Purpose, Sealer};

fuzz_target!(|input: &[u8]| {
    let ring = KeyRing::parse(&["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]).expect("a valid key ring");
    let sealer = Sealer::new(ring, 16 * 1024);
    let metrics = Metrics::default();
    let alice = Principal::new("https://issuer.example.com", "alice", Vec::new());
    let bob = Principal::new("https://issuer.example.com", "bob", Vec::new());

    // The bytes as an id presented as is: never a session.
    if let Ok(token) = std::str::from_utf8(input) {
        assert!(session::open(&sealer, &metrics, &alice, token).is_err(), "a forged session id opened");
    }
    // The bytes as what a sealed id holds.
    let binding = Binding { purpose: Purpose::Session, principal: alice.key(), method: "", context: &[0; 32] };
    let Ok(token) = sealer.seal(&binding, now_ms() + 60_000, input) else { return };
    assert!(session::open(&sealer, &metrics, &bob, &token).is_err(), "opened for another principal");
    match session::open(&sealer, &metrics, &alice, &token) {
        Ok(opened) => {
            let again = session::mint(&sealer, &alice, &opened, 60).expect("an opened session seals again");
            let reopened = session::open(&sealer, &metrics, &alice, &again).expect("and opens again");
            assert_eq!(
                serde_json::to_value(&opened).expect("encodes"),
                serde_json::to_value(&reopened).expect("encodes"),
                "a session changed on a round trip"
            );
            let _ = opened.protocol_version();
        }
        Err(GatewayError::SessionNotFound { .. }) => {}
        Err(other) => panic!("opening gave {other:?}, not session not found"),
    }
});
