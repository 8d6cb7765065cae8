//! A server-sent events reader for upstream response streams: turns arriving byte chunks
//! into the `data` of each event, and keeps the stream's last event id and `retry` delay (a
//! 2025-11-25 client resumes a stream that ended early with them, SEP-1699).
//!
//! Invariant: memory stays bounded: an event whose data exceeds the limit is reported as
//! too large and skipped, never buffered past the limit; an event id longer than
//! `MAX_EVENT_ID` is ignored.

/// Longest event id kept (sent back as `Last-Event-ID`).
const MAX_EVENT_ID: usize = 256;

/// What one chunk of input yielded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// An event's data (its `data:` lines joined by newlines).
    Data(Vec<u8>),
    /// An event whose data exceeded the limit (its first bytes, to find its id).
    TooLarge(Vec<u8>),
    /// An `event: endpoint` (2024-11-05 HTTP+SSE): where to POST messages.
    Endpoint(Vec<u8>),
}

/// Incremental parser state.
#[derive(Debug)]
pub(crate) struct SseReader {
    max: usize,
    line: Vec<u8>,
    data: Vec<u8>,
    has_data: bool,
    too_large: bool,
    /// This event's `event:` field is `endpoint`.
    endpoint: bool,
    /// The last byte seen was `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
    /// The last `id:` seen (visible ASCII only, at most `MAX_EVENT_ID` bytes).
    last_id: Option<String>,
    /// The last `retry:` seen, in milliseconds.
    retry_ms: Option<u64>,
}

impl SseReader {
    pub(crate) fn new(max: usize) -> Self {
        Self {
            max,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            too_large: false,
            endpoint: false,
            after_cr: false,
            last_id: None,
            retry_ms: None,
        }
    }

    /// The stream's last event id, if it sent one.
    pub(crate) fn last_event_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// The reconnection delay the stream asked for (`retry:`), in milliseconds.
    pub(crate) fn retry_ms(&self) -> Option<u64> {
        self.retry_ms
    }

    /// Feeds a chunk; completed events are appended to `out`.
    pub(crate) fn feed(&mut self, chunk: &[u8], out: &mut Vec<Event>) {
        for &b in chunk {
            if self.after_cr {
                self.after_cr = false;
                if b == b'\n' {
                    continue;
                }
            }
            match b {
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(out);
                }
                _ => {
                    if self.line.len() <= self.max {
                        self.line.push(b);
                    } else {
                        self.too_large = true;
                    }
                }
            }
        }
    }

    fn end_line(&mut self, out: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            if self.too_large {
                out.push(Event::TooLarge(std::mem::take(&mut self.data)));
            } else if self.has_data && self.endpoint {
                out.push(Event::Endpoint(std::mem::take(&mut self.data)));
            } else if self.has_data {
                out.push(Event::Data(std::mem::take(&mut self.data)));
            }
            self.data.clear();
            self.has_data = false;
            self.too_large = false;
            self.endpoint = false;
            return;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(0) => return, // a comment
            Some(at) => {
                let value = &line[at + 1..];
                (&line[..at], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (&line[..], &[][..]),
        };
        if field == b"event" {
            self.endpoint = value == b"endpoint";
            return;
        }
        if field == b"id" {
            // Kept only when it can travel back as a header value.
            if value.len() <= MAX_EVENT_ID && value.iter().all(|b| (0x20..0x7f).contains(b)) {
                self.last_id = Some(String::from_utf8_lossy(value).into_owned());
            }
            return;
        }
        if field == b"retry" {
            if !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
                self.retry_ms = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
            }
            return;
        }
        if field != b"data" {
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.has_data = true;
        if self.data.len() + value.len() > self.max {
            self.too_large = true;
            let room = 512usize.saturating_sub(self.data.len());
            self.data.extend_from_slice(&value[..room.min(value.len())]);
        } else if !self.too_large {
            self.data.extend_from_slice(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_across_chunks_and_line_ends() {
        let mut r = SseReader::new(1024);
        let mut out = Vec::new();
        r.feed(b"event: message\r\nid: 1\r\ndata: {\"a\"", &mut out);
        assert!(out.is_empty());
        r.feed(b":1}\r\n\r\n: keep-alive\n\ndata: x\ndata: y\n\n", &mut out);
        assert_eq!(out, vec![Event::Data(b"{\"a\":1}".to_vec()), Event::Data(b"x\ny".to_vec())]);
        r.feed(b"event: endpoint\ndata: /messages?sessionId=1\n\n", &mut out);
        assert_eq!(out[2], Event::Endpoint(b"/messages?sessionId=1".to_vec()));
    }

    #[test]
    fn the_last_event_id_and_retry_are_kept() {
        let mut r = SseReader::new(1024);
        let mut out = Vec::new();
        r.feed(b"id: event-1\nretry: 500\ndata: \n\n", &mut out);
        assert_eq!((r.last_event_id(), r.retry_ms()), (Some("event-1"), Some(500)));
        r.feed(b"id: e\x01vil\nretry: soon\ndata: x\n\n", &mut out);
        assert_eq!((r.last_event_id(), r.retry_ms()), (Some("event-1"), Some(500)), "unusable values ignored");
        let long = format!("id: {}\n\n", "x".repeat(MAX_EVENT_ID + 1));
        r.feed(long.as_bytes(), &mut out);
        assert_eq!(r.last_event_id(), Some("event-1"));
    }

    #[test]
    fn oversized_events_are_skipped() {
        let mut r = SseReader::new(8);
        let mut out = Vec::new();
        r.feed(b"data: 0123456789abcdef\n\ndata: ok\n\n", &mut out);
        assert!(matches!(out[0], Event::TooLarge(_)));
        assert_eq!(out[1], Event::Data(b"ok".to_vec()));
    }
}
