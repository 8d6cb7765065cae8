//! A stdio server's output, as the gateway reads it: one JSON-RPC message per line, lines over
//! the size limit skipped; whatever the bytes and however the pipe delivers them, every line is
//! read whole or reported too long, and nothing more.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // The first byte picks the read size, the second the line limit.
    let (Some(&chunk), Some(&max)) = (input.first(), input.get(1)) else { return };
    mcpgate_upstream::fuzzing::stdio_lines(&input[2..], usize::from(chunk) + 1, usize::from(max) * 4);
});
