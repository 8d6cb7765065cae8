//! Seal crate tests through the public API: round trip, tampering anywhere, every binding
//! field, expiry, key rotation and unknown keys, size limits, and that nothing secret leaks
//! through `Debug` or error text.

use mcpgate_seal::{Binding, KeyRing, OpenFailure, Purpose, SealError, Sealer, context_digest};

const K1: &str = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
const K2: &str = "k2:HxwdHhsaGRgXFhUUExIREA8ODQwLCgkIBwYFBAMCAQA=";
const NOW: u64 = 1_750_000_000_000;
const LATER: u64 = NOW + 60_000;

fn sealer(specs: &[&str]) -> Sealer {
    Sealer::new(KeyRing::parse(specs).expect("valid keys"), 4096)
}

fn ctx(name: &str) -> [u8; 32] {
    context_digest(&[name.as_bytes(), b"{\"env\":\"prod\"}", b"2026-07-28"])
}

fn binding<'a>(principal: &'a str, context: &'a [u8; 32]) -> Binding<'a> {
    Binding { purpose: Purpose::RequestState, principal, method: "tools/call", context }
}

fn reason(r: Result<Vec<u8>, SealError>) -> OpenFailure {
    r.expect_err("must not open").open_failure().expect("an open failure")
}

#[test]
fn round_trip_and_format() {
    let s = sealer(&[K1]);
    let c = ctx("deploy");
    let b = binding("alice", &c);
    let token = s.seal(&b, LATER, b"{\"step\":2}").expect("seals");
    assert!(token.starts_with("v1.k1."), "{token}");
    assert!(token.bytes().all(|c| c.is_ascii_graphic()), "visible ASCII only (fits a header)");
    assert_eq!(s.open(&b, NOW, &token).expect("opens"), b"{\"step\":2}");
    assert_eq!(s.open(&b, LATER, &token).expect("opens at the expiry instant"), b"{\"step\":2}");
    let empty = s.seal(&b, LATER, b"").expect("seals empty");
    assert_eq!(s.open(&b, NOW, &empty).expect("opens"), b"");
}

#[test]
fn nonces_are_fresh() {
    let s = sealer(&[K1]);
    let c = ctx("x");
    let b = binding("alice", &c);
    let a = s.seal(&b, LATER, b"same").expect("seal");
    let z = s.seal(&b, LATER, b"same").expect("seal");
    assert_ne!(a, z, "same payload must not produce the same token");
    assert_ne!(Sealer::nonce_of(&a), Sealer::nonce_of(&z));
    assert!(Sealer::nonce_of(&a).is_some());
}

#[test]
fn tampering_any_character_fails() {
    let s = sealer(&[K1, K2]);
    let c = ctx("deploy");
    let b = binding("alice", &c);
    let token = s.seal(&b, LATER, b"payload that matters").expect("seal");
    for (i, ch) in token.char_indices() {
        for replacement in ['A', 'B', '-', '_', '2'] {
            if replacement == ch {
                continue;
            }
            let mut tampered = token.clone();
            tampered.replace_range(i..=i, &replacement.to_string());
            assert!(s.open(&b, NOW, &tampered).is_err(), "tampered at {i} ({ch}->{replacement}) still opened");
        }
    }
    for len in 0..token.len() {
        assert!(s.open(&b, NOW, &token[..len]).is_err(), "truncated to {len} still opened");
    }
    assert!(s.open(&b, NOW, &format!("{token}A")).is_err(), "extended token still opened");
}

#[test]
fn tampering_reasons_are_precise() {
    let s = sealer(&[K1, K2]);
    let c = ctx("deploy");
    let b = binding("alice", &c);
    let token = s.seal(&b, LATER, b"p").expect("seal");
    assert_eq!(reason(s.open(&b, NOW, &token.replacen("v1.", "v2.", 1))), OpenFailure::UnsupportedVersion);
    assert_eq!(reason(s.open(&b, NOW, &token.replacen(".k1.", ".k2.", 1))), OpenFailure::Integrity);
    assert_eq!(reason(s.open(&b, NOW, &token.replacen(".k1.", ".k9.", 1))), OpenFailure::UnknownKey);
    assert_eq!(reason(s.open(&b, NOW, "v1.k1.!!!")), OpenFailure::Malformed);
    assert_eq!(reason(s.open(&b, NOW, "v1.k1.AAAA")), OpenFailure::Malformed);
    assert_eq!(reason(s.open(&b, NOW, "nodots")), OpenFailure::Malformed);
    assert_eq!(reason(s.open(&b, NOW, "v1..AAAA")), OpenFailure::Malformed);
    assert_eq!(reason(s.open(&b, NOW, &format!("{token}.x"))), OpenFailure::Malformed);
}

#[test]
fn every_binding_field_is_enforced() {
    let s = sealer(&[K1]);
    let c = ctx("deploy");
    let b = binding("alice", &c);
    let token = s.seal(&b, LATER, b"p").expect("seal");

    let other = binding("bob", &c);
    assert_eq!(reason(s.open(&other, NOW, &token)), OpenFailure::Integrity, "wrong principal");

    let session = Binding { purpose: Purpose::Session, ..b };
    assert_eq!(reason(s.open(&session, NOW, &token)), OpenFailure::Integrity, "wrong purpose");

    let prompts = Binding { method: "prompts/get", ..b };
    assert_eq!(reason(s.open(&prompts, NOW, &token)), OpenFailure::Integrity, "wrong method");

    let other_ctx = ctx("delete");
    let elsewhere = binding("alice", &other_ctx);
    assert_eq!(reason(s.open(&elsewhere, NOW, &token)), OpenFailure::Integrity, "wrong context");

    // Length framing: moving bytes between adjacent fields must not produce the same binding.
    let split_a = Binding { principal: "alicetools/", method: "call", ..b };
    assert_eq!(reason(s.open(&split_a, NOW, &token)), OpenFailure::Integrity, "field splicing");
}

#[test]
fn expired_tokens_do_not_open() {
    let s = sealer(&[K1]);
    let c = ctx("x");
    let b = binding("alice", &c);
    let token = s.seal(&b, NOW, b"p").expect("seal");
    assert_eq!(reason(s.open(&b, NOW + 1, &token)), OpenFailure::Expired);
}

#[test]
fn rotation_first_key_seals_every_key_opens() {
    let c = ctx("x");
    let b = binding("alice", &c);
    let old = sealer(&[K1]);
    let token = old.seal(&b, LATER, b"minted before rotation").expect("seal");

    let rotated = sealer(&[K2, K1]);
    assert_eq!(rotated.open(&b, NOW, &token).expect("old key still opens"), b"minted before rotation");
    let fresh = rotated.seal(&b, LATER, b"new").expect("seal");
    assert!(fresh.starts_with("v1.k2."), "the first key seals: {fresh}");
    assert_eq!(reason(old.open(&b, NOW, &fresh)), OpenFailure::UnknownKey, "a replica without k2 refuses");

    let retired = sealer(&[K2]);
    assert_eq!(reason(retired.open(&b, NOW, &token)), OpenFailure::UnknownKey, "retired key no longer opens");
}

#[test]
fn size_limits() {
    let s = sealer(&[K1]);
    let c = ctx("x");
    let b = binding("alice", &c);
    match s.seal(&b, LATER, &vec![0u8; 4096]) {
        Err(SealError::TooLarge { size, max }) => assert!(size > max && max == 4096),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    let huge = "v1.k1.".to_owned() + &"A".repeat(10_000);
    assert_eq!(reason(s.open(&b, NOW, &huge)), OpenFailure::TooLong);
    // The largest payload that fits still round-trips.
    let mut n = 3000;
    while s.seal(&b, LATER, &vec![1u8; n + 1]).is_ok() {
        n += 1;
    }
    let token = s.seal(&b, LATER, &vec![1u8; n]).expect("fits");
    assert!(token.len() <= 4096);
    assert_eq!(s.open(&b, NOW, &token).expect("opens").len(), n);
}

#[test]
fn key_parsing_errors_name_the_problem_never_the_key() {
    let secret = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=";
    for (spec, needle) in
        [("nokid", "expected"), ("bad.kid:AAAA", "key id"), ("k1:not base64!", "base64"), ("k1:AAAA", "32 bytes")]
    {
        let err = KeyRing::parse(&[spec]).expect_err(spec).to_string();
        assert!(err.contains(needle), "{spec}: {err}");
    }
    let dup = KeyRing::parse(&[format!("a:{secret}"), format!("a:{secret}")]).expect_err("duplicate").to_string();
    assert!(dup.contains("duplicate") && !dup.contains(secret), "{dup}");
    assert!(KeyRing::parse::<&str>(&[]).is_err(), "empty ring");
    // URL-safe alphabet is accepted too.
    let ring = KeyRing::parse(&["u:_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-8"]).expect("url-safe");
    let dbg = format!("{ring:?}");
    assert!(dbg.contains("\"u\"") && !dbg.contains("_-_-"), "{dbg}");
}

#[test]
fn errors_are_opaque_and_never_carry_plaintext() {
    let s = sealer(&[K1]);
    let c = ctx("x");
    let b = binding("alice", &c);
    let token = s.seal(&b, NOW, b"top secret plaintext").expect("seal");
    for r in [s.open(&b, LATER, &token), s.open(&binding("mallory", &c), NOW, &token)] {
        let e = r.expect_err("fails");
        assert_eq!(e.to_string(), "invalid sealed value");
        assert!(!format!("{e:?}").contains("secret"));
    }
    assert!(!format!("{s:?}").contains("AAECAw"), "Debug of a sealer shows no key bytes");
}

#[test]
fn generated_rings_work_and_differ() {
    let a = Sealer::new(KeyRing::generate("local").expect("rng"), 4096);
    let z = Sealer::new(KeyRing::generate("local").expect("rng"), 4096);
    let c = ctx("x");
    let b = binding("alice", &c);
    let token = a.seal(&b, LATER, b"p").expect("seal");
    assert_eq!(a.open(&b, NOW, &token).expect("opens"), b"p");
    assert_eq!(reason(z.open(&b, NOW, &token)), OpenFailure::Integrity, "another random key refuses");
}
