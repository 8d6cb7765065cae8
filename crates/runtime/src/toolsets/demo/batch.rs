//! `process_batch`: works through a list of items one at a time and checkpoints after each,
//! so its work survives a move to another replica: a task run resumes from its last
//! checkpoint, and a synchronous call on a replica that sheds load is handed to another
//! replica at a checkpoint (see `ToolContext::checkpoint`).
//!
//! Invariant: an item is processed once per call (or task), wherever the call continues; the
//! result says how many items this invocation did and how many it found done already.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use mcpgate_protocol::content::ContentBlock;
use mcpgate_protocol::tool::CallToolResult;

use crate::catalog::{
    BoxFuture, Failure, Outcome, TaskPolicy, Tool, ToolCall, ToolContext, ToolDescriptor, decode_args,
};

/// The most items one call takes.
const MAX_ITEMS: usize = 1000;

/// See the module docs.
pub(super) struct ProcessBatch {
    descriptor: ToolDescriptor,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Args {
    items: Vec<String>,
    #[serde(default = "default_step_ms")]
    step_ms: u64,
}

fn default_step_ms() -> u64 {
    200
}

impl Args {
    fn parse(arguments: &Value) -> Result<Self, Failure> {
        let args = decode_args::<Self>(arguments)?;
        if args.items.is_empty() || args.items.len() > MAX_ITEMS {
            return Err(Failure::InvalidArguments(format!(
                "invalid arguments: items must hold 1 to {MAX_ITEMS} entries"
            )));
        }
        if !(1..=5000).contains(&args.step_ms) {
            return Err(Failure::InvalidArguments("invalid arguments: stepMs must be 1 to 5000".to_owned()));
        }
        Ok(args)
    }
}

/// How far a call got: the results of the items done so far, in order.
#[derive(Deserialize, serde::Serialize, Default)]
struct Checkpoint {
    done: Vec<String>,
}

impl ProcessBatch {
    pub(super) fn new() -> Self {
        Self {
            descriptor: ToolDescriptor::new(
                "process_batch",
                "Process a list of items one at a time, checkpointing after each: a busy replica may hand the \
                 call to another, which continues where it stopped.",
                json!({"type": "object", "properties": {
                    "items": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MAX_ITEMS, "description": "The items to process"},
                    "stepMs": {"type": "integer", "minimum": 1, "maximum": 5000, "default": 200, "description": "Time one item takes, in milliseconds"}
                }, "required": ["items"]}),
            )
            .title("Process a batch")
            .task_policy(TaskPolicy::Optional)
            .output_schema(json!({"type": "object", "properties": {
                "processed": {"type": "array", "items": {"type": "string"}},
                "resumedAt": {"type": "integer"},
                "processedInThisCall": {"type": "integer"}
            }, "required": ["processed", "resumedAt", "processedInThisCall"]})),
        }
    }
}

impl Tool for ProcessBatch {
    fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    fn check(&self, arguments: &Value) -> Result<(), Failure> {
        Args::parse(arguments).map(drop)
    }

    fn call<'a>(&'a self, call: ToolCall, cx: &'a ToolContext) -> BoxFuture<'a, Outcome<CallToolResult>> {
        Box::pin(async move {
            let args = match Args::parse(&call.arguments) {
                Ok(a) => a,
                Err(e) => return Outcome::Failed(e),
            };
            // The state is a checkpoint this tool wrote (sealed or stored by the gateway); one
            // that does not fit these arguments is a bug, not something to build on.
            let mut progress: Checkpoint = match call.state {
                Some(state) => match serde_json::from_value(state) {
                    Ok(c) => c,
                    Err(e) => return Outcome::Failed(Failure::Internal(format!("unreadable checkpoint: {e}"))),
                },
                None => Checkpoint::default(),
            };
            if progress.done.len() > args.items.len() {
                return Outcome::Failed(Failure::Internal("checkpoint ahead of the batch".to_owned()));
            }
            let resumed_at = progress.done.len();
            let total = args.items.len() as f64;
            for item in &args.items[resumed_at..] {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(args.step_ms)) => {}
                    () = cx.cancelled() => return Outcome::Failed(Failure::Internal("cancelled".to_owned())),
                }
                progress.done.push(format!("{item}: ok"));
                let n = progress.done.len();
                cx.progress(n as f64, Some(total), Some(&format!("Processed {n} of {}", args.items.len()))).await;
                if n < args.items.len() {
                    let state = serde_json::to_value(&progress).unwrap_or(Value::Null);
                    cx.checkpoint(&state).await;
                }
            }
            let here = progress.done.len() - resumed_at;
            let mut result = CallToolResult::success(vec![ContentBlock::text(format!(
                "Processed {} items ({here} in this call, {resumed_at} done before).",
                progress.done.len()
            ))]);
            result.structured_content =
                Some(json!({"processed": progress.done, "resumedAt": resumed_at, "processedInThisCall": here}));
            Outcome::Complete(result)
        })
    }
}
