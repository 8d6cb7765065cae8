//! A server-sent events reader for upstream response streams: turns arriving byte chunks
//! into the `data` of each event, keeps the stream's last event id and `retry` delay (a
//! 2025-11-25 client resumes a stream that ended early with them, SEP-1699), and tells how
//! long an unfinished event has been held.
//!
//! Threat model: the upstream is not trusted to be well-behaved; a hostile or broken one may
//! send an event that never ends (endless `data` lines, even empty ones, or one endless line)
//! to grow the replica's memory, or trickle one to hold a stream open for ever.
//!
//! Invariants: memory stays bounded: the data of an event, its `\n` separators included, is
//! counted against the limit before it is kept, and the line being read never holds more
//! than what could still fit plus [`LINE_SLACK`], so at most `max + LINE_SLACK` bytes are
//! buffered whatever arrives and however it is split. An event over the limit is reported
//! once, as soon as it crosses it (with its first bytes, to find its id), and the rest of it
//! is skipped. An event id longer than `MAX_EVENT_ID` is ignored. [`Unfinished`] measures how long an event (or line) has been left unfinished,
//! so a stream that nothing else bounds can be dropped.

use std::time::Duration;

use tokio::time::Instant;

/// Bytes the line being read may hold beyond the room left in the event's data: enough for
/// a field name and a short value (`event: endpoint`, `id: …`) when the data is full.
pub(crate) const LINE_SLACK: usize = 32;
/// Most bytes of an oversized event kept to report it (its id is near the start).
const PREFIX: usize = 512;
/// Longest event id kept (sent back as `Last-Event-ID`).
const MAX_EVENT_ID: usize = 256;

/// What one chunk of input yielded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// An event's data (its `data:` lines joined by newlines).
    Data(Vec<u8>),
    /// An event whose data exceeds the limit (its first bytes, to find its id), reported when
    /// it crossed the limit; the rest of it is skipped.
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
    /// This event crossed the limit (and was reported): the rest of it is skipped.
    too_large: bool,
    /// The line being read outgrew what could fit: the rest of it is skipped.
    skip_line: bool,
    /// A field (not a comment) of this event was read: the event is open.
    open: bool,
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
            skip_line: false,
            open: false,
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

    /// Whether an event (or a line) has begun and not ended: keep-alive comments between
    /// events leave nothing open.
    pub(crate) fn pending(&self) -> bool {
        self.open || self.skip_line || !self.line.is_empty()
    }

    /// Bytes held for the event being read (its data and the line being read).
    #[cfg(any(test, feature = "fuzzing"))]
    pub(crate) fn buffered(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// Feeds a chunk; completed (and oversized) events are appended to `out`.
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
                _ if self.skip_line => {}
                // What a data line could still add, plus room for a field name.
                _ if self.line.len() >= self.max.saturating_sub(self.data.len()) + LINE_SLACK => {
                    self.line_overflows(out);
                }
                _ => self.line.push(b),
            }
        }
    }

    /// The line being read cannot fit: a data line makes its event too large; any other
    /// field is dropped (a long `event:` is not `endpoint`).
    fn line_overflows(&mut self, out: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        self.skip_line = true;
        if line.first() == Some(&b':') {
            return;
        }
        self.open = true;
        if let Some(value) = line.strip_prefix(b"data:") {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            self.exceeds(value, out);
        } else if line.starts_with(b"event:") {
            self.endpoint = false;
        }
    }

    /// This event's data (with `value` to come) is over the limit: reported once, with its
    /// first bytes, and nothing more of it is kept.
    fn exceeds(&mut self, value: &[u8], out: &mut Vec<Event>) {
        self.has_data = true;
        if self.too_large {
            return;
        }
        self.too_large = true;
        let mut prefix = std::mem::take(&mut self.data);
        if !prefix.is_empty() {
            prefix.push(b'\n');
        }
        let room = PREFIX.saturating_sub(prefix.len());
        prefix.extend_from_slice(&value[..room.min(value.len())]);
        prefix.truncate(PREFIX);
        prefix.shrink_to_fit();
        out.push(Event::TooLarge(prefix));
    }

    fn end_line(&mut self, out: &mut Vec<Event>) {
        let line = std::mem::take(&mut self.line);
        if std::mem::take(&mut self.skip_line) {
            return;
        }
        if line.is_empty() {
            if !self.too_large && self.has_data {
                let data = std::mem::take(&mut self.data);
                out.push(if self.endpoint { Event::Endpoint(data) } else { Event::Data(data) });
            }
            self.data = Vec::new();
            self.has_data = false;
            self.too_large = false;
            self.open = false;
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
        self.open = true;
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
        if field != b"data" || self.too_large {
            return;
        }
        // The separator before this line counts as much as the line.
        let separator = usize::from(self.has_data);
        if self.data.len() + separator + value.len() > self.max {
            self.exceeds(value, out);
            return;
        }
        if self.has_data {
            self.data.push(b'\n');
        }
        self.has_data = true;
        self.data.extend_from_slice(value);
    }
}

/// How long a stream's reader has held an unfinished event, for streams that nothing else
/// bounds (a session's GET stream, a 2024-11-05 session stream): an event begun and not
/// ended within the limit ends the stream. Complete events (keep-alive comments included)
/// restart the clock.
#[derive(Debug)]
pub(crate) struct Unfinished {
    limit: Duration,
    since: Option<Instant>,
}

impl Unfinished {
    pub(crate) fn new(limit: Duration) -> Self {
        Self { limit, since: None }
    }

    /// After a chunk was fed to `reader`, which yielded `events`.
    pub(crate) fn fed(&mut self, reader: &SseReader, events: &[Event]) {
        // An oversized event is reported before it ends: that is no progress.
        let progressed = events.iter().any(|e| !matches!(e, Event::TooLarge(_)));
        self.since = match (reader.pending(), self.since) {
            (false, _) => None,
            (true, Some(since)) if !progressed => Some(since),
            (true, _) => Some(Instant::now()),
        };
    }

    /// Resolves once an event has been left unfinished for the limit; never while none is.
    pub(crate) async fn expired(&self) {
        match self.since {
            Some(since) => tokio::time::sleep_until(since + self.limit).await,
            None => std::future::pending().await,
        }
    }

    /// The limit, for messages.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn oversized_events_are_skipped() {
        let mut r = SseReader::new(8);
        let mut out = Vec::new();
        r.feed(b"data: 0123456789abcdef\n\ndata: ok\n\n", &mut out);
        assert!(matches!(out[0], Event::TooLarge(_)));
        assert_eq!(out[1], Event::Data(b"ok".to_vec()));
    }

    /// Feeds `chunk` `times` times; returns the events and the most bytes ever buffered.
    fn flood(r: &mut SseReader, chunk: &[u8], times: usize) -> (Vec<Event>, usize) {
        let (mut out, mut most) = (Vec::new(), 0);
        for _ in 0..times {
            r.feed(chunk, &mut out);
            most = most.max(r.buffered());
        }
        (out, most)
    }

    #[test]
    fn empty_data_lines_count_against_the_limit() {
        // Each empty `data` line adds a separator to the event: 100,000 of them are 100 KB.
        for line_end in [&b"\n"[..], b"\r\n", b"\r"] {
            let mut r = SseReader::new(1024);
            let line = [&b"data"[..], line_end].concat();
            let (out, most) = flood(&mut r, &line, 100_000);
            assert!(most <= 1024 + LINE_SLACK, "{most} bytes buffered with a limit of 1024");
            // Reported once, when it crossed the limit, without waiting for the event's end.
            assert_eq!(out.len(), 1, "{out:?}");
            let Event::TooLarge(prefix) = &out[0] else { panic!("{out:?}") };
            assert!(prefix.len() <= 512);
            // The rest of the event is skipped; the next one is read.
            let mut out = Vec::new();
            r.feed(b"\n\ndata: next\n\n", &mut out);
            assert_eq!(out, vec![Event::Data(b"next".to_vec())]);
        }
    }

    #[test]
    fn separators_are_counted_exactly() {
        // Three lines of 2 bytes joined by 2 newlines: 8 bytes, at a limit of 8 and 7.
        let mut out = Vec::new();
        SseReader::new(8).feed(b"data: ab\ndata: cd\ndata: ef\n\n", &mut out);
        assert_eq!(out, vec![Event::Data(b"ab\ncd\nef".to_vec())]);
        let mut out = Vec::new();
        SseReader::new(7).feed(b"data: ab\ndata: cd\ndata: ef\n\n", &mut out);
        assert!(matches!(&out[..], [Event::TooLarge(_)]), "{out:?}");
        // Empty lines too: five of them are four separators.
        let mut out = Vec::new();
        SseReader::new(4).feed(b"data\ndata\ndata\ndata\ndata\n\n", &mut out);
        assert_eq!(out, vec![Event::Data(b"\n\n\n\n".to_vec())]);
        let mut out = Vec::new();
        SseReader::new(3).feed(b"data\ndata\ndata\ndata\ndata\n\n", &mut out);
        assert!(matches!(&out[..], [Event::TooLarge(_)]), "{out:?}");
    }

    #[test]
    fn an_endless_line_is_bounded_and_reported_with_its_id() {
        let mut r = SseReader::new(4096);
        let mut out = Vec::new();
        r.feed(b"data: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":\"", &mut out);
        let (more, most) = flood(&mut r, &[b'x'; 1000], 1000);
        assert!(most <= 4096 + LINE_SLACK, "{most} bytes buffered with a limit of 4096");
        let [Event::TooLarge(prefix)] = &more[..] else { panic!("{more:?}") };
        assert_eq!(crate::rpc::sniff_id(prefix), Some(7));
        // Other fields and comments never grow it either, nor hold an event open once ended.
        let (out, most) = flood(&mut r, b"x\r\n\r\n: keep-alive\r\nid: 1\r\nevent: message\r\n", 10_000);
        assert!(out.is_empty() && most <= 4096 + LINE_SLACK, "{out:?} {most}");
    }

    #[test]
    fn what_holds_an_event_open() {
        let mut r = SseReader::new(64);
        let mut out = Vec::new();
        assert!(!r.pending());
        r.feed(b": keep-alive\n", &mut out);
        assert!(!r.pending(), "a complete comment holds nothing open");
        r.feed(b": half a comm", &mut out);
        assert!(r.pending(), "a line not yet ended does");
        r.feed(b"ent\nid: 3\n", &mut out);
        assert!(r.pending(), "so does a field of an event not yet ended");
        r.feed(b"\n", &mut out);
        assert!(!r.pending());
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_left_unfinished_expires_and_complete_ones_restart_the_clock() {
        use tokio::time::timeout;
        let (mut r, mut u, mut out) = (SseReader::new(64), Unfinished::new(Duration::from_secs(10)), Vec::new());
        async fn expires_within(u: &Unfinished, secs: u64) -> bool {
            timeout(Duration::from_secs(secs), u.expired()).await.is_ok()
        }
        // Nothing open (keep-alives only): never.
        r.feed(b": ping\n\n", &mut out);
        u.fed(&r, &out);
        assert!(!expires_within(&u, 3600).await);
        // An event begun: 10 s after it began, however its bytes trickle in.
        r.feed(b"data: a", &mut out);
        u.fed(&r, &out);
        tokio::time::advance(Duration::from_secs(6)).await;
        r.feed(b"b\ndata", &mut out);
        u.fed(&r, &out);
        assert!(!expires_within(&u, 3).await);
        // Flooding it past the limit is no progress either.
        r.feed(&b"data\n".repeat(100), &mut out);
        u.fed(&r, &out);
        assert!(matches!(&out[..], [Event::TooLarge(_)]), "{out:?}");
        assert!(expires_within(&u, 2).await);
        // A complete event restarts the clock for the next one.
        out.clear();
        r.feed(b"\n\ndata: c\n\ndata: d", &mut out);
        u.fed(&r, &out);
        assert!(!expires_within(&u, 9).await);
        assert!(expires_within(&u, 2).await);
    }
}
