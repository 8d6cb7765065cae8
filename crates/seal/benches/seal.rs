//! Criterion benchmark: seal + open of a 1 KiB payload (budget: < 5 µs together).

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mcpgate_seal::{Binding, DEFAULT_MAX_TOKEN_LEN, KeyRing, Purpose, Sealer, context_digest};

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

criterion_group!(benches, seal_open);
criterion_main!(benches);
