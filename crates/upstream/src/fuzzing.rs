//! Entry points for the fuzz targets (`fuzz/`), behind the `fuzzing` feature: not API.

use futures_util::FutureExt as _;

use crate::transport::sse::{Event, LINE_SLACK, SseReader};

/// Reads `stream` as an upstream's SSE body (lines over `max` bytes skipped) twice, whole and
/// in chunks of `chunk` bytes (at least 1): a frame boundary must never change what is read.
/// Returns the events read (panics on a difference).
pub fn sse(stream: &[u8], chunk: usize, max: usize) -> usize {
    let mut whole = Vec::new();
    SseReader::new(max).feed(stream, &mut whole);
    let mut pieces = Vec::new();
    let mut reader = SseReader::new(max);
    for part in stream.chunks(chunk.max(1)) {
        reader.feed(part, &mut pieces);
    }
    assert_eq!(whole, pieces, "chunking changed the events");
    whole.len()
}

/// Reads `stream` `times` times over (at least once) as one upstream SSE body, cut into chunks
/// whose sizes cycle through `sizes` (each plus one; 64 bytes when empty), and checks the
/// reader's memory after every chunk: it never holds more than `max` plus `LINE_SLACK` (32)
/// bytes, however long an unfinished event grows; no event read is over `max`, no oversized
/// one is reported with more than 512 bytes. Returns the events read (panics on a breach).
pub fn sse_memory(stream: &[u8], sizes: &[u8], times: usize, max: usize) -> usize {
    let mut reader = SseReader::new(max);
    let mut events = Vec::new();
    let mut read = 0;
    let mut sizes = sizes.iter().map(|&s| usize::from(s) + 1).cycle();
    let body = stream.repeat(times.max(1));
    let mut rest = &body[..];
    while !rest.is_empty() {
        let (chunk, after) = rest.split_at(sizes.next().unwrap_or(64).min(rest.len()));
        rest = after;
        reader.feed(chunk, &mut events);
        let held = reader.buffered();
        assert!(held <= max + LINE_SLACK, "{held} bytes buffered with a limit of {max}");
        for event in events.drain(..) {
            read += 1;
            match event {
                Event::Data(data) | Event::Endpoint(data) => assert!(data.len() <= max, "an event over the limit"),
                Event::TooLarge(prefix) => assert!(prefix.len() <= 512, "a prefix of {} bytes", prefix.len()),
            }
        }
    }
    read
}

/// Reads `stream` as a stdio server's output (JSON-RPC messages one per line, lines over `max`
/// bytes skipped), delivered `chunk` bytes at a time (at least 1), and checks every line
/// against a plain split on newlines: a complete line is read byte for byte, a longer one is
/// reported too long with at most `max` of its first bytes, and nothing else is read. Returns
/// the lines read (panics on a difference).
pub fn stdio_lines(stream: &[u8], chunk: usize, max: usize) -> usize {
    use crate::transport::stdio::{Line, read_line};
    let mut expected: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    // Text after the last newline is a line only if there is some.
    if expected.last().is_some_and(|l| l.is_empty()) {
        expected.pop();
    }
    let mut reader = tokio::io::BufReader::with_capacity(chunk.max(1), stream);
    let mut line = Vec::new();
    for (i, want) in expected.iter().enumerate() {
        line.clear();
        let read = read_line(&mut reader, &mut line, max).now_or_never().expect("an in-memory read never waits");
        match read.expect("an in-memory read never fails") {
            Line::Complete => assert_eq!(line.as_slice(), *want, "line {i} read differently"),
            Line::TooLong => {
                assert!(want.len() > max, "line {i} of {} bytes reported too long (max {max})", want.len());
                assert!(line.len() <= max && want.starts_with(&line), "line {i}: not a prefix within max");
            }
            Line::Eof => panic!("end of output before line {i} of {}", expected.len()),
        }
    }
    line.clear();
    let end = read_line(&mut reader, &mut line, max).now_or_never().expect("never waits").expect("never fails");
    assert!(matches!(end, Line::Eof), "more read than there is");
    expected.len()
}
