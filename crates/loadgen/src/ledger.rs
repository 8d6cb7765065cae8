//! The counted tool's run ledger, read once at the end of a run: how many times each key ran.
//! Runs of this run's keys beyond each key's first are double runs.
//!
//! Invariant: only keys of tasks this run created (whose ids the clients got back) are
//! counted; a key that never ran is not a double run (its task is missing, stuck or failed,
//! which the flows count).

use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::flows::{Failure, retry};
use crate::mcp::Mcp;

/// What the ledger says about this run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Runs {
    /// The ledger tool.
    pub(crate) tool: String,
    /// Keys in the whole ledger (other runs' included).
    pub(crate) ledger_keys: u64,
    /// Runs in the whole ledger.
    pub(crate) ledger_runs: u64,
    /// Keys of the counted tasks this run created.
    pub(crate) keys: u64,
    /// Of those, the keys that ran at least once.
    pub(crate) ran: u64,
    /// Runs of those keys beyond each key's first.
    pub(crate) double_runs: u64,
    /// Why the ledger could not be read: then nothing was checked, and the run fails.
    pub(crate) error: Option<String>,
    /// A few keys that ran more than once, with their task and run count (to look for).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) examples: Vec<String>,
}

/// Double-run examples kept in the report.
const EXAMPLES: usize = 5;

/// Calls `tool` (a synchronous 2026-07-28 call with request id `id`, retried while failures
/// are transient, within `within`) and counts the runs of `keys`.
pub(crate) async fn read(mcp: &Mcp, id: &str, tool: &str, keys: &[(String, String)], within: Duration) -> Runs {
    let mut retried = 0;
    let params = json!({"name": tool, "arguments": {}});
    let answer = retry(within, &mut retried, || mcp.modern(id, "tools/call", params.clone(), false)).await;
    let failed =
        |error: String| Runs { tool: tool.to_owned(), keys: keys.len() as u64, error: Some(error), ..Runs::default() };
    match answer {
        Ok(answer) => match ledger(&answer.result) {
            Ok(ledger) => count(tool, keys, ledger),
            Err(error) => failed(error),
        },
        Err(Failure::Call(e)) => failed(format!("calling {tool}: {e}")),
        Err(other) => failed(format!("calling {tool}: {}", other.kind())),
    }
}

/// The `runs` object of a ledger result: its `structuredContent`, or the JSON of its text.
fn ledger(result: &Value) -> Result<&Map<String, Value>, String> {
    if result["isError"] == true {
        return Err(format!("the ledger tool failed: {result}"));
    }
    let runs = result["structuredContent"]["runs"].as_object();
    runs.ok_or_else(|| format!("the ledger's result has no structuredContent.runs object: {result}"))
}

/// Counts the runs of `keys` (each with its task id) in `ledger` (a key may appear once in
/// `keys`: each is one task).
pub(crate) fn count(tool: &str, keys: &[(String, String)], ledger: &Map<String, Value>) -> Runs {
    let runs_of = |key: &str| ledger.get(key).and_then(Value::as_u64).unwrap_or(0);
    let mut runs = Runs {
        tool: tool.to_owned(),
        ledger_keys: ledger.len() as u64,
        ledger_runs: ledger.values().filter_map(Value::as_u64).sum(),
        keys: keys.len() as u64,
        ..Runs::default()
    };
    for (key, task) in keys {
        let n = runs_of(key);
        if n > 0 {
            runs.ran += 1;
            runs.double_runs += n - 1;
        }
        if n > 1 && runs.examples.len() < EXAMPLES {
            runs.examples.push(format!("{key} (task {task}) ran {n} times"));
        }
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_runs_beyond_the_first_of_our_keys_count() {
        let ledger = json!({"a-0-0": 1, "a-0-3": 3, "a-1-0": 2, "other-0-0": 5});
        let keys: Vec<(String, String)> =
            ["a-0-0", "a-0-3", "a-1-0", "a-1-4"].map(|k| (k.to_owned(), format!("t-{k}"))).to_vec();
        let runs = count("ledger", &keys, ledger.as_object().expect("object"));
        assert_eq!(
            runs,
            Runs {
                tool: "ledger".to_owned(),
                ledger_keys: 4,
                ledger_runs: 11,
                keys: 4,
                // a-1-4 never ran: not a double run.
                ran: 3,
                double_runs: 3,
                error: None,
                examples: vec![
                    "a-0-3 (task t-a-0-3) ran 3 times".to_owned(),
                    "a-1-0 (task t-a-1-0) ran 2 times".to_owned()
                ],
            }
        );
    }

    #[test]
    fn a_result_without_a_ledger_is_an_error() {
        assert!(ledger(&json!({"content": [{"type": "text", "text": "hi"}]})).is_err());
        assert!(ledger(&json!({"isError": true, "structuredContent": {"runs": {}}})).is_err());
        let ok = json!({"structuredContent": {"runs": {"k": 1}}});
        assert_eq!(ledger(&ok).expect("runs").len(), 1);
    }
}
