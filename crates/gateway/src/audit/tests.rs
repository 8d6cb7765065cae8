//! The writer's promise: a sink that stops taking lines never stalls the caller; what does not
//! fit in the queue is dropped and counted, and what was queued is written once the sink moves.

use std::io::Write;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::writer::Writer;
use super::{Audit, AuditConfig};

/// A sink that blocks every write until the test lets it go, and keeps what it was given.
struct Gate {
    open: Arc<Mutex<mpsc::Receiver<()>>>,
    written: Arc<Mutex<Vec<u8>>>,
}

impl Write for Gate {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // Each batch waits for one permission (bounded: a test never hangs on it).
        let _ = self.open.lock().expect("gate").recv_timeout(Duration::from_secs(10));
        self.written.lock().expect("written").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_stuck_sink_drops_and_counts_lines_instead_of_blocking() {
    let (permit, open) = mpsc::channel();
    let written = Arc::new(Mutex::new(Vec::new()));
    let gate = Gate { open: Arc::new(Mutex::new(open)), written: written.clone() };
    let writer = Writer::start(Box::new(gate), 1).expect("writer");
    // At most one line is in the thread's hands and one in the queue: the rest are dropped.
    for i in 0..5 {
        writer.send(format!("{{\"n\":{i}}}\n").into_bytes());
    }
    assert!(writer.dropped() >= 3, "dropped {}", writer.dropped());
    for _ in 0..10 {
        let _ = permit.send(());
    }
    assert!(writer.flush(Duration::from_secs(10)).await, "the writer did not flush within 10 s");
    let text = String::from_utf8(written.lock().expect("written").clone()).expect("utf-8");
    assert!(text.starts_with("{\"n\":0}\n"), "{text}");
    assert_eq!(text.lines().count() as u64 + writer.dropped(), 5, "{text}");
}

#[test]
fn off_by_default_and_counters_are_always_exposed() {
    let audit = Audit::start(&AuditConfig::default(), "r1").expect("disabled audit");
    assert!(!audit.is_enabled());
    let mut text = String::new();
    audit.render(&mut text);
    assert!(text.contains("mcpgate_audit_dropped_total 0\n"), "{text}");
}

#[test]
fn an_unwritable_file_stops_start_up_naming_the_setting() {
    let config = AuditConfig {
        enabled: true,
        sink: crate::config::AuditSink::File,
        path: Some("/nonexistent-dir/audit.jsonl".to_owned()),
        include_arguments: false,
    };
    let err = Audit::start(&config, "r1").expect_err("unwritable path");
    assert!(err.to_string().contains("audit.path"), "{err}");
}
