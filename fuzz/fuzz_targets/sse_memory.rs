//! An upstream's SSE body, as the gateway reads it, against the reader's memory: whatever the
//! bytes (endless `data` lines, an endless line, separators of any kind) and however the
//! network splits them, the reader never holds more than the limit plus a field name.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // Byte 0 picks the limit, byte 1 how often the body repeats (a 4 KB input then pushes
    // up to 32 KB through a limit of at most 1 KB) and how many chunk sizes follow.
    let (Some(&max), Some(&shape)) = (input.first(), input.get(1)) else { return };
    let (times, count) = (usize::from(shape >> 4) % 8 + 1, usize::from(shape & 0x0f));
    let Some((sizes, stream)) = input[2..].split_at_checked(count) else { return };
    mcpgate_upstream::fuzzing::sse_memory(stream, sizes, times, usize::from(max) * 4 + 1);
});
