//! Entry points for the fuzz targets (`fuzz/`), behind the `fuzzing` feature: not API.

use crate::transport::sse::SseReader;

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
