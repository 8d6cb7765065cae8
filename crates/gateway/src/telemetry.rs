//! Logging and tracing: `tracing` to stderr as text or JSON, filtered by `log.level`, and,
//! in builds with the `otel` feature (a default one), span export over OTLP/HTTP when the standard
//! `OTEL_EXPORTER_OTLP_ENDPOINT` (or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set. Stdout is
//! kept for the one line scripts read (`listening on http://…`), and for the audit trail when
//! `audit.sink = "stdout"`.
//!
//! Exported spans are mcpgate's own at info level: the request's `mcp` span (method, era,
//! pseudonymous principal, task id) and the worker's `task` span (task id, tool, attempt), so
//! every span of a task's life carries its id, whichever replica ran it. A queued task's run
//! is a trace of its own that links to the request that created the task (its `traceparent`
//! is kept in the task record), and records its outcome in a `settle` span. No request or
//! result content is put on spans. Audit lines (`audit.enabled`) are exported too, as span
//! events of target `mcpgate_audit` on the span they happened in (there is no OTLP logs
//! exporter in this build: the trail rides on the trace export). The text format escapes the
//! control characters of every field (`escaped_fields`), so no logged value forges a line.
//! A field recorded as an error (`error = &e as &dyn std::error::Error`) is printed with its
//! whole `source` chain in both formats: `error=outer: cause: root` in the text log,
//! `"error":"outer","error.sources":["cause","root"]` in the JSON log (`error_sources`).

mod error_sources;
mod escaped_fields;

use std::io::IsTerminal as _;

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

use crate::config::{LogConfig, LogFormat};
use crate::error::StartupError;

/// The `tracing` target of audit events (exported with spans when OpenTelemetry is on; never
/// printed to the log, which has its own lines).
pub const AUDIT_TARGET: &str = "mcpgate_audit";

/// The environment variables that turn span export on.
const OTLP_ENDPOINT_VARS: [&str; 2] = ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"];

/// Keeps span export running; flushes what is buffered when dropped (at exit).
#[derive(Debug, Default)]
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider.take() {
            // Best effort: the collector may be gone by now.
            let _ = provider.shutdown();
        }
    }
}

/// Installs the global subscriber. `env` reads the environment (the OTLP variables).
pub fn init(config: &LogConfig, env: &dyn Fn(&str) -> Option<String>) -> Result<Telemetry, StartupError> {
    let filter = EnvFilter::try_new(&config.level)
        .map_err(|e| StartupError::config_caused("log.level (MCPGATE_LOG_LEVEL)", "not a valid filter", e))?;
    // Audit events are for the export only: the trail writes lines of its own.
    let quiet_audit = format!("{}=off", AUDIT_TARGET)
        .parse()
        .map_err(|e| StartupError::step_caused("installing the logger", "the audit target is no filter", e))?;
    let filter = filter.add_directive(quiet_audit);
    // Colours only for a person at a terminal: escape codes garble files and log collectors.
    let ansi = std::io::stderr().is_terminal();
    let logs = match config.format {
        LogFormat::Text => text_layer(std::io::stderr, ansi).boxed(),
        LogFormat::Json => json_layer(std::io::stderr).boxed(),
    }
    .with_filter(filter)
    .boxed();
    let endpoint = OTLP_ENDPOINT_VARS.iter().find_map(|v| env(v).filter(|s| !s.trim().is_empty()));
    let (export, telemetry) = export_layer(endpoint.as_deref(), env)?;
    // Each layer has its own filter: log.level does not limit what is exported.
    let layers: Vec<BoxedLayer> = std::iter::once(logs).chain(export).collect();
    tracing_subscriber::registry()
        .with(layers)
        .try_init()
        .map_err(|e| StartupError::step_caused("installing the logger", "another one is installed", e))?;
    if endpoint.is_some() && !cfg!(feature = "otel") {
        tracing::warn!("OTEL_EXPORTER_OTLP_ENDPOINT is set but this build has no span export (cargo feature `otel`)");
    }
    Ok(telemetry)
}

/// The text log: `tracing_subscriber`'s format, with every field's control characters escaped
/// (one event is one line, whatever a caller or an upstream put in a value).
pub(crate) fn text_layer<S, W>(
    writer: W,
    ansi: bool,
) -> tracing_subscriber::fmt::Layer<S, escaped_fields::EscapedFields, tracing_subscriber::fmt::format::Format, W>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .fmt_fields(escaped_fields::EscapedFields::default())
        .with_writer(writer)
        .with_ansi(ansi)
}

/// The JSON log: `tracing_subscriber`'s format with the event's fields at the top level, and
/// each error field's sources beside it.
pub(crate) fn json_layer<S, W>(
    writer: W,
) -> tracing_subscriber::fmt::Layer<
    S,
    tracing_subscriber::fmt::format::JsonFields,
    error_sources::WithSources<tracing_subscriber::fmt::format::Format<tracing_subscriber::fmt::format::Json>>,
    W,
>
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
    W: for<'w> tracing_subscriber::fmt::MakeWriter<'w> + 'static,
{
    let format = tracing_subscriber::fmt::format().json().flatten_event(true);
    tracing_subscriber::fmt::layer().json().event_format(error_sources::WithSources(format)).with_writer(writer)
}

type BoxedLayer = Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The OTLP export layer (filtered to mcpgate's own spans at info level), when configured.
#[cfg(feature = "otel")]
fn export_layer(
    endpoint: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Option<BoxedLayer>, Telemetry), StartupError> {
    use opentelemetry::trace::TracerProvider as _;
    use tracing_subscriber::filter::{FilterExt as _, LevelFilter, Targets, filter_fn};

    let Some(endpoint) = endpoint else { return Ok((None, Telemetry::default())) };
    // Its HTTP client (reqwest, built without a default TLS backend) needs the process's
    // crypto provider, as the JWKS client does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // The exporter reads the OTEL_EXPORTER_OTLP_* variables itself (endpoint, headers,
    // timeout; no compression is built in).
    let exporter = opentelemetry_otlp::SpanExporter::builder().with_http().build().map_err(|e| {
        StartupError::step_caused(format!("span export to {endpoint}"), "the exporter cannot be built", e)
    })?;
    let service = env("OTEL_SERVICE_NAME").filter(|s| !s.trim().is_empty()).unwrap_or_else(|| "mcpgate".to_owned());
    let resource = opentelemetry_sdk::Resource::builder().with_service_name(service).build();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource)
        .build();
    let tracer = provider.tracer("mcpgate");
    // Spans only ("mcpgate" matches every mcpgate_* crate too): log events carry details
    // (error texts, a client's error message) that must not leave through traces. The one
    // exception is the audit trail's events, which are made to be exported (span events of
    // the request or task run they belong to).
    let filter = Targets::new()
        .with_target("mcpgate", LevelFilter::INFO)
        .and(filter_fn(|meta| meta.is_span() || meta.target() == AUDIT_TARGET));
    let layer = tracing_opentelemetry::layer().with_tracer(tracer).with_filter(filter).boxed();
    let _ = EXPORTING.set(true);
    Ok((Some(layer), Telemetry { provider: Some(provider) }))
}

/// Whether spans are exported (set once, when the export layer is installed).
#[cfg(feature = "otel")]
static EXPORTING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();

/// Whether spans (and audit events) are exported over OTLP.
#[cfg(feature = "otel")]
pub fn exporting() -> bool {
    EXPORTING.get().is_some()
}

/// Without the `otel` feature nothing is exported.
#[cfg(not(feature = "otel"))]
pub fn exporting() -> bool {
    false
}

/// The W3C `traceparent` of the current span, when spans are exported.
#[cfg(feature = "otel")]
pub fn traceparent() -> Option<String> {
    use opentelemetry::trace::TraceContextExt as _;
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    EXPORTING.get()?;
    let context = tracing::Span::current().context();
    let span = context.span();
    let sc = span.span_context();
    sc.is_valid().then(|| format!("00-{}-{}-{:02x}", sc.trace_id(), sc.span_id(), sc.trace_flags().to_u8()))
}

/// Without span export there is no trace to name.
#[cfg(not(feature = "otel"))]
pub fn traceparent() -> Option<String> {
    None
}

/// How a run's span links to its creation, when spans are exported.
#[cfg(feature = "otel")]
pub fn trace_link() -> Option<mcpgate_runtime::worker::TraceLink> {
    use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};
    use tracing_opentelemetry::OpenTelemetrySpanExt as _;
    EXPORTING.get()?;
    Some(mcpgate_runtime::worker::TraceLink(std::sync::Arc::new(|span: &tracing::Span, parent: &str| {
        // 00-<trace id, 32 hex>-<span id, 16 hex>-<flags, 2 hex>; anything else is ignored.
        let mut parts = parent.split('-');
        let (Some("00"), Some(trace), Some(id), Some(flags), None) =
            (parts.next(), parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Ok(trace), Ok(id), Ok(flags)) =
            (TraceId::from_hex(trace), SpanId::from_hex(id), u8::from_str_radix(flags, 16))
        else {
            return;
        };
        let linked = SpanContext::new(trace, id, TraceFlags::new(flags), true, TraceState::default());
        if linked.is_valid() {
            span.add_link(linked);
        }
    })))
}

/// Without span export there is nothing to link.
#[cfg(not(feature = "otel"))]
pub fn trace_link() -> Option<mcpgate_runtime::worker::TraceLink> {
    None
}

/// Without the `otel` feature there is nothing to export to.
#[cfg(not(feature = "otel"))]
fn export_layer(
    _endpoint: Option<&str>,
    _env: &dyn Fn(&str) -> Option<String>,
) -> Result<(Option<BoxedLayer>, Telemetry), StartupError> {
    Ok((None, Telemetry::default()))
}
