//! How the text log writes the fields of events and spans: as `tracing_subscriber`'s default
//! format does, with every control character of a value (and of the message) escaped.
//!
//! Threat model: many logged values come from callers or upstreams (a resource URI, a tool or
//! upstream name, an upstream's error text, a header). The default format writes `%`
//! (Display) fields and the message as they are, so a value holding `\n` starts a line of its
//! own that a reader or a log shipper takes for the gateway's (`... level=INFO ...`), and one
//! holding ESC drives a terminal. Invariant: one event is one line; a value with a control
//! character (C0, DEL, C1, and the Unicode line and paragraph separators) is written with it
//! escaped (`\n`, `\u{1b}`), and its backslashes doubled so an escape cannot be forged either.
//! Values without one are written unchanged. The JSON format escapes by itself.

use std::error::Error;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing_subscriber::field::{MakeVisitor, VisitFmt, VisitOutput};
use tracing_subscriber::fmt::format::{DefaultFields, DefaultVisitor, Writer};

use crate::error::Chain;

/// The text log's [`FormatFields`](tracing_subscriber::fmt::FormatFields): the default one,
/// escaped.
#[derive(Debug, Default)]
pub(crate) struct EscapedFields(DefaultFields);

impl<'a> MakeVisitor<Writer<'a>> for EscapedFields {
    type Visitor = Escaping<DefaultVisitor<'a>>;

    fn make_visitor(&self, target: Writer<'a>) -> Self::Visitor {
        Escaping(self.0.make_visitor(target))
    }
}

/// Wraps a visitor so that what it is given is escaped first.
#[derive(Debug)]
pub(crate) struct Escaping<V>(V);

impl<V: Visit> Visit for Escaping<V> {
    fn record_str(&mut self, field: &Field, value: &str) {
        // The default visitor quotes and escapes a `&str` field itself (Debug), but writes
        // the message as it is.
        if field.name() == "message" && needs_escape(value) {
            self.0.record_debug(field, &Raw(&escape(value)));
        } else {
            self.0.record_str(field, value);
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn Error + 'static)) {
        // The error and every source, as one value.
        let text = Chain(value).to_string();
        self.0.record_debug(field, &Raw(&escape(&text)));
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let text = format!("{value:?}");
        if needs_escape(&text) {
            self.0.record_debug(field, &Raw(&escape(&text)));
        } else {
            self.0.record_debug(field, &Raw(&text));
        }
    }
}

impl<V: VisitOutput<fmt::Result>> VisitOutput<fmt::Result> for Escaping<V> {
    fn finish(self) -> fmt::Result {
        self.0.finish()
    }
}

impl<V: VisitFmt> VisitFmt for Escaping<V> {
    fn writer(&mut self) -> &mut dyn fmt::Write {
        self.0.writer()
    }
}

/// Text already formatted, written as it is by `{:?}`.
struct Raw<'a>(&'a str);

impl fmt::Debug for Raw<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0)
    }
}

fn is_breaking(c: char) -> bool {
    c.is_control() || matches!(c, '\u{2028}' | '\u{2029}')
}

fn needs_escape(text: &str) -> bool {
    text.chars().any(is_breaking)
}

/// `text` with its control characters escaped and its backslashes doubled.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_breaking(c) => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
pub(super) mod tests {
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    use tracing_subscriber::layer::SubscriberExt as _;

    use super::escape;

    /// A log sink tests read back.
    #[derive(Clone, Default)]
    pub(in crate::telemetry) struct Sink(pub(in crate::telemetry) Arc<Mutex<Vec<u8>>>);

    impl Sink {
        /// What `log` writes through the layer `layer` makes of a sink.
        pub(in crate::telemetry) fn logged<L>(
            layer: impl FnOnce(Box<dyn Fn() -> Sink + Send + Sync>) -> L,
            log: impl FnOnce(),
        ) -> String
        where
            L: tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync,
        {
            let sink = Sink::default();
            let writer = sink.clone();
            let subscriber = tracing_subscriber::registry().with(layer(Box::new(move || writer.clone())));
            tracing::subscriber::with_default(subscriber, log);
            String::from_utf8(sink.0.lock().expect("sink").clone()).expect("utf-8")
        }
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("sink").extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[derive(Debug)]
    struct Hostile;

    impl std::fmt::Display for Hostile {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("upstream said\nINFO forged=true")
        }
    }

    impl std::error::Error for Hostile {}

    #[test]
    fn caller_controlled_values_cannot_forge_lines_in_the_text_log() {
        let text = Sink::logged(
            |writer| crate::telemetry::text_layer(writer, false),
            || {
                let uri = "docs://x\n2026-01-01T00:00:00Z  INFO mcpgate: forged line";
                let span = tracing::info_span!("mcp", method = %"tools/call\r\nforged");
                let _entered = span.enter();
                tracing::warn!(uri = %uri, name = ?"a\nb", error = &Hostile as &dyn std::error::Error, "denied {}", "x\ny");
                tracing::info!(plain = %"docs://ok/plan", "a quiet line");
            },
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "one line per event: {text}");
        assert!(lines[0].contains(r"uri=docs://x\n2026-01-01T00:00:00Z  INFO mcpgate: forged line"), "{text}");
        assert!(lines[0].contains(r"denied x\ny") && lines[0].contains(r"tools/call\r\nforged"), "{text}");
        assert!(lines[0].contains(r"upstream said\nINFO forged=true"), "{text}");
        assert!(
            lines[1].contains("plain=docs://ok/plan a quiet line")
                || lines[1].contains("a quiet line plain=docs://ok/plan"),
            "{text}"
        );
    }

    /// An error of three levels, the innermost holding a line break.
    #[derive(Debug, thiserror::Error)]
    #[error("reading a task")]
    pub(in crate::telemetry) struct Reading(#[source] Unanswered);

    #[derive(Debug, thiserror::Error)]
    #[error("the store did not answer")]
    pub(in crate::telemetry) struct Unanswered(#[source] std::io::Error);

    pub(in crate::telemetry) fn reading() -> Reading {
        Reading(Unanswered(std::io::Error::other("connection refused\nINFO forged=true")))
    }

    #[test]
    fn an_error_field_is_printed_with_its_whole_chain_in_the_text_log() {
        let text = Sink::logged(
            |writer| crate::telemetry::text_layer(writer, false),
            || {
                tracing::warn!(error = &reading() as &dyn std::error::Error, "cannot read");
            },
        );
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            text.contains(r"error=reading a task: the store did not answer: connection refused\nINFO forged=true"),
            "{text}"
        );
    }

    #[test]
    fn escaping_cannot_be_forged_with_backslashes() {
        assert_eq!(escape("a\\nb\n"), "a\\\\nb\\n");
        assert_eq!(escape("bell\u{7}esc\u{1b}[31m ls\u{2028}"), "bell\\u{7}esc\\u{1b}[31m ls\\u{2028}");
    }
}
