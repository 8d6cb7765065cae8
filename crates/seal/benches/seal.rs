//! Criterion benchmark: seal + open of a 1 KiB payload (budget: < 5 µs together), and the
//! sealing of task payloads at rest by size.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpgate_seal::{AtRest, Binding, DEFAULT_MAX_TOKEN_LEN, KeyRing, Purpose, RecordBinding, Sealer, context_digest};

fn seal_open(c: &mut Criterion) {
    let ring = KeyRing::parse(&["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]).expect("key");
    let sealer = Sealer::new(ring, DEFAULT_MAX_TOKEN_LEN);
    let context = context_digest(&[b"tools/call", b"deploy", b"2026-07-28"]);
    let binding = Binding {
        purpose: Purpose::RequestState,
        principal: "https://issuer.example.com|user-42",
        method: "tools/call",
        context: &context,
    };
    let payload = vec![0x5a_u8; 1024];
    let mut group = c.benchmark_group("seal");
    group.throughput(Throughput::Bytes(payload.len() as u64));
    group.bench_function("seal+open 1KiB", |b| {
        b.iter(|| {
            let token = sealer.seal(&binding, u64::MAX, black_box(&payload)).expect("seal");
            let opened = sealer.open(&binding, 0, black_box(&token)).expect("open");
            black_box(opened)
        });
    });
    group.bench_function("seal 1KiB", |b| {
        b.iter(|| sealer.seal(&binding, u64::MAX, black_box(&payload)).expect("seal"))
    });
    let token = sealer.seal(&binding, u64::MAX, &payload).expect("seal");
    group.bench_function("open 1KiB", |b| b.iter(|| sealer.open(&binding, 0, black_box(&token)).expect("open")));
    group.finish();
}

/// What sealing task payloads at rest adds to a write and a read of one field.
fn at_rest(c: &mut Criterion) {
    let ring = KeyRing::parse(&["k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="]).expect("key");
    let at_rest = AtRest::new(&Sealer::new(ring, DEFAULT_MAX_TOKEN_LEN), true);
    let id = "t03-AAAAAAAAAAAAAAAAAAAAAA";
    let binding = RecordBinding::new(id, &["owner-key", "modern", "tool"]);
    let mut group = c.benchmark_group("at_rest");
    for size in [256_usize, 4096, 65_536] {
        let payload = format!("{{\"text\":\"{}\"}}", "x".repeat(size - 11));
        group.throughput(Throughput::Bytes(payload.len() as u64));
        group.bench_function(format!("seal {size} B"), |b| {
            b.iter(|| at_rest.seal(id, &binding, "result", black_box(payload.clone())).expect("seal"))
        });
        let stored = at_rest.seal(id, &binding, "result", payload.clone()).expect("seal");
        group.bench_function(format!("open {size} B"), |b| {
            b.iter(|| at_rest.open(id, &binding, "result", black_box(stored.clone())).expect("open"))
        });
    }
    group.finish();
}

criterion_group!(benches, seal_open, at_rest);
criterion_main!(benches);
