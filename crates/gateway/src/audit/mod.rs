//! The audit trail: one JSON line per request that reaches a tool, prompt or resource
//! (`tools/call`, `prompts/get`, `resources/read`, both eras) and per task transition this
//! replica makes, written to stdout or a file by a writer thread (see `writer`), and, when
//! OpenTelemetry export is on, emitted as a `tracing` event of target [`TARGET`] that the
//! export layer sends along with the span it happened in. Field names are documented in
//! docs/audit.md and are stable.
//!
//! Invariants: off (the default), nothing is built, parsed or queued; on, recording never
//! blocks a request or a worker (a full queue drops the line and counts it); results are never
//! written, arguments only with `audit.include_arguments`; the sink is opened at start-up, so a
//! path that cannot be written stops start-up.

mod decision;
mod event;
mod request;
mod writer;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::Value;

use mcpgate_protocol::{Era, JsonObject, Method};
use mcpgate_runtime::catalog::SharedCatalog;
use mcpgate_runtime::task_transition::{TaskTransition, TransitionNote, TransitionObserver};

pub use decision::PolicyDecision;
pub use event::MAX_LINE_BYTES;
pub(crate) use request::RequestAudit;

use crate::call_context::CallContext;
use crate::config::{AuditConfig, AuditSink};
use crate::error::StartupError;
use event::{AuditEvent, PrincipalField};
use writer::Writer;

pub use crate::telemetry::AUDIT_TARGET as TARGET;

/// The replica's audit trail (cheap to clone; off unless `audit.enabled`).
#[derive(Debug, Clone, Default)]
pub struct Audit(Option<Arc<Trail>>);

/// An enabled trail.
#[derive(Debug)]
pub(crate) struct Trail {
    writer: Writer,
    replica: String,
    include_arguments: bool,
    /// Audit events go to the OpenTelemetry export too.
    export: bool,
    /// Where task transitions find their tool's upstream (set once the catalog exists).
    catalog: OnceLock<SharedCatalog>,
}

impl Audit {
    /// Opens the sink and starts the writer when `config.enabled`; `replica` names this
    /// replica in every line.
    pub fn start(config: &AuditConfig, replica: &str) -> Result<Self, StartupError> {
        Self::start_with_capacity(config, replica, writer::QUEUE_LINES)
    }

    fn start_with_capacity(config: &AuditConfig, replica: &str, capacity: usize) -> Result<Self, StartupError> {
        if !config.enabled {
            return Ok(Self(None));
        }
        let sink: Box<dyn std::io::Write + Send> = match config.sink {
            AuditSink::Stdout => Box::new(std::io::stdout()),
            AuditSink::File => {
                let path = config.path.as_deref().unwrap_or_default();
                let file = std::fs::OpenOptions::new().create(true).append(true).open(path).map_err(|e| {
                    StartupError::config_caused("audit.path (MCPGATE_AUDIT_PATH)", "cannot be opened for appending", e)
                })?;
                Box::new(file)
            }
        };
        let writer = Writer::start(sink, capacity)
            .map_err(|e| StartupError::step_caused("starting the audit writer", "no thread could be started", e))?;
        Ok(Self(Some(Arc::new(Trail {
            writer,
            replica: replica.to_owned(),
            include_arguments: config.include_arguments,
            export: crate::telemetry::exporting(),
            catalog: OnceLock::new(),
        }))))
    }

    /// Whether lines are written.
    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Lets task transitions name their tool's upstream.
    pub(crate) fn attach_catalog(&self, catalog: &SharedCatalog) {
        if let Some(trail) = &self.0 {
            let _ = trail.catalog.set(catalog.clone());
        }
    }

    /// The observer the task book and workers report transitions to (`None` when off).
    pub(crate) fn observer(&self) -> Option<Arc<dyn TransitionObserver>> {
        self.0.clone().map(|trail| trail as Arc<dyn TransitionObserver>)
    }

    /// Opens the audit of an admitted request (`None` when off or not an audited method):
    /// `name` is the tool or prompt name or the resource URI, `upstream` where it lives;
    /// `arguments` are asked for only with `audit.include_arguments`.
    pub(crate) fn request(
        &self,
        cx: &CallContext,
        name: &str,
        upstream: Option<&str>,
        arguments: impl FnOnce() -> Option<JsonObject>,
    ) -> Option<RequestAudit> {
        let trail = self.0.as_ref()?;
        let (method, era, principal) = (cx.method, cx.era, &cx.principal);
        if !matches!(method, Method::ToolsCall | Method::PromptsGet | Method::ResourcesRead) {
            return None;
        }
        let arguments = trail.include_arguments.then(|| Value::Object(arguments().unwrap_or_default()));
        Some(RequestAudit {
            trail: trail.clone(),
            started: tokio::time::Instant::now(),
            method,
            era,
            issuer: principal.issuer().to_owned(),
            subject: principal.subject().to_owned(),
            server: cx.endpoint.name().to_owned(),
            name: name.to_owned(),
            upstream: upstream.map(str::to_owned),
            arguments,
            policy: PolicyDecision::Allowed,
        })
    }

    /// Waits, at most `timeout`, until every line so far is written (at shutdown).
    pub async fn flush(&self, timeout: Duration) -> bool {
        match &self.0 {
            Some(trail) => trail.writer.flush(timeout).await,
            None => true,
        }
    }

    /// Appends the audit counters to a Prometheus exposition.
    pub fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        let (dropped, failed) = self.0.as_ref().map_or((0, 0), |t| (t.writer.dropped(), t.writer.write_failures()));
        out.push_str("# HELP mcpgate_audit_dropped_total Audit lines dropped because the writer fell behind.\n");
        out.push_str("# TYPE mcpgate_audit_dropped_total counter\n");
        let _ = writeln!(out, "mcpgate_audit_dropped_total {dropped}");
        out.push_str("# HELP mcpgate_audit_write_failures_total Batches of audit lines the sink refused.\n");
        out.push_str("# TYPE mcpgate_audit_write_failures_total counter\n");
        let _ = writeln!(out, "mcpgate_audit_write_failures_total {failed}");
    }
}

impl Trail {
    /// Serializes `event` and queues it (and exports it, when export is on).
    fn emit(&self, event: &mut AuditEvent<'_>) {
        let line = event.clipped_line();
        if self.export {
            let text = std::str::from_utf8(&line).unwrap_or_default().trim_end();
            tracing::info!(target: TARGET, audit = text, "audit");
        }
        self.writer.send(line);
    }
}

impl TransitionObserver for Trail {
    fn transition(&self, note: &TransitionNote<'_>) {
        let (outcome, terminal) = match note.transition {
            TaskTransition::Created | TaskTransition::Working => ("ok", false),
            TaskTransition::InputRequired => ("input_required", false),
            TaskTransition::Completed { tool_error: false } => ("ok", true),
            TaskTransition::Completed { tool_error: true } => ("tool_error", true),
            TaskTransition::Failed => ("error", true),
            TaskTransition::Cancelled => ("cancelled", true),
            TaskTransition::Expired => ("expired", true),
        };
        let lived = note.created_ms.filter(|_| terminal).map(|created| crate::time::now_ms().saturating_sub(created));
        let catalog = self.catalog.get().map(SharedCatalog::load);
        let upstream =
            catalog.as_ref().and_then(|c| c.tool(note.tool)).and_then(|(tool, _)| tool.descriptor().upstream.clone());
        let event_name = match note.transition {
            TaskTransition::Created => "task.created",
            TaskTransition::Working => "task.working",
            TaskTransition::InputRequired => "task.input_required",
            TaskTransition::Completed { .. } => "task.completed",
            TaskTransition::Failed => "task.failed",
            TaskTransition::Cancelled => "task.cancelled",
            TaskTransition::Expired => "task.expired",
        };
        let mut event = AuditEvent {
            time: crate::time::iso8601(crate::time::now_ms()),
            event: event_name,
            principal: PrincipalField { iss: note.issuer, sub: note.subject },
            server: note.server,
            upstream: upstream.as_deref(),
            name: note.tool,
            era: note.era.map(Era::as_str),
            outcome,
            error_code: None,
            duration_ms: lived,
            task_id: Some(note.task_id),
            policy: None,
            policy_rule: None,
            replica: &self.replica,
            arguments: None,
            arguments_truncated: false,
        };
        self.emit(&mut event);
    }
}

#[cfg(test)]
mod tests;
