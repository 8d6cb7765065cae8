//! How the JSON log writes a field recorded as an error: `tracing_subscriber`'s JSON format
//! writes the error's own text only (`"error":"reading a task"`), so this format adds its
//! sources after the event's other keys, outermost first (`"error.sources":["the store did
//! not answer","connection refused"]`), as the text format's chain does.
//!
//! Invariant: an event without an error that has a source is written exactly as the JSON
//! format writes it; one with such an error is that same line with one key per error field
//! added before its closing brace (the JSON format escapes every value by itself).

use std::error::Error;
use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// A JSON event format (`F`) whose error fields carry their sources.
#[derive(Debug)]
pub(crate) struct WithSources<F>(pub(crate) F);

impl<S, N, F> FormatEvent<S, N> for WithSources<F>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'w> FormatFields<'w> + 'static,
    F: FormatEvent<S, N>,
{
    fn format_event(&self, ctx: &FmtContext<'_, S, N>, mut writer: Writer<'_>, event: &Event<'_>) -> fmt::Result {
        let mut sources = Sources::default();
        event.record(&mut sources);
        if sources.0.is_empty() {
            return self.0.format_event(ctx, writer, event);
        }
        let mut line = String::new();
        self.0.format_event(ctx, Writer::new(&mut line), event)?;
        // The JSON format writes one object and a line break: the keys go before its brace.
        let Some(object) = line.trim_end_matches('\n').strip_suffix('}') else {
            return writer.write_str(&line);
        };
        writer.write_str(object)?;
        for (name, list) in &sources.0 {
            let key = serde_json::to_string(&format!("{name}.sources")).map_err(|_| fmt::Error)?;
            let list = serde_json::to_string(list).map_err(|_| fmt::Error)?;
            write!(writer, ",{key}:{list}")?;
        }
        writeln!(writer, "}}")
    }
}

/// The error fields of an event that have sources, each with its sources' texts.
#[derive(Default)]
struct Sources(Vec<(&'static str, Vec<String>)>);

impl Visit for Sources {
    fn record_error(&mut self, field: &Field, value: &(dyn Error + 'static)) {
        let mut list = Vec::new();
        let mut next = value.source();
        while let Some(cause) = next {
            list.push(cause.to_string());
            next = cause.source();
        }
        if !list.is_empty() {
            self.0.push((field.name(), list));
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn fmt::Debug) {}
}

#[cfg(test)]
mod tests {
    use crate::telemetry::escaped_fields::tests::{Sink, reading};

    #[test]
    fn an_error_field_is_written_with_its_sources_in_the_json_log() {
        let text = Sink::logged(crate::telemetry::json_layer, || {
            let span = tracing::info_span!("mcp", method = "tools/call");
            let _entered = span.enter();
            tracing::warn!(error = &reading() as &dyn std::error::Error, task = "t1", "cannot read");
            tracing::warn!(error = &std::io::Error::other("alone") as &dyn std::error::Error, "no sources");
        });
        let lines: Vec<serde_json::Value> =
            text.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert_eq!(lines[0]["error"], "reading a task", "{text}");
        assert_eq!(
            lines[0]["error.sources"],
            serde_json::json!(["the store did not answer", "connection refused\nINFO forged=true"]),
            "{text}"
        );
        assert_eq!((&lines[0]["task"], &lines[0]["message"]), (&"t1".into(), &"cannot read".into()), "{text}");
        assert_eq!(lines[0]["span"]["method"], "tools/call", "{text}");
        assert_eq!(lines[1]["error"], "alone", "{text}");
        assert!(lines[1].get("error.sources").is_none(), "no key without a source: {text}");
    }
}
