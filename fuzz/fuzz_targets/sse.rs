//! An upstream's SSE body, as the gateway reads it from a Streamable HTTP or HTTP+SSE server:
//! whatever the bytes and wherever the network splits them, the same events come out.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // The first byte picks the chunk size, the second the line limit.
    let (Some(&chunk), Some(&max)) = (input.first(), input.get(1)) else { return };
    mcpgate_upstream::fuzzing::sse(&input[2..], usize::from(chunk) + 1, usize::from(max) * 4 + 1);
});
