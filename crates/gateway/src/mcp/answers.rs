//! Answers to a task's input requests, checked before they reach the store: each is bounded in
//! size (`tasks.max_answer_bytes`) and decoded here as the result of each method an input
//! request can ask, so the store only compares the method its request asks against that list
//! (no script decodes client-sized JSON, and its cost does not grow with the answers).

use mcpgate_protocol::input::InputResponse;
use mcpgate_store::{Answered, CheckedAnswer, CheckedAnswers};

use crate::error::{GatewayError, clip};
use crate::state::AppState;

/// Methods an input request can ask.
const METHODS: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/// Checks answers: (key, JSON) pairs.
pub(super) fn check(
    state: &AppState,
    answers: impl IntoIterator<Item = (String, String)>,
) -> Result<CheckedAnswers, GatewayError> {
    let max = state.config.tasks.max_answer_bytes;
    let mut checked = CheckedAnswers::new();
    for (key, json) in answers {
        if json.len() as u64 > max {
            return Err(GatewayError::invalid_params(format!(
                "the answer to input request {} is larger than {max} bytes",
                clip(&key)
            )));
        }
        let fits = METHODS
            .into_iter()
            .filter(|method| {
                let mut de = serde_json::Deserializer::from_str(&json);
                InputResponse::decode_for(method, &mut de).is_ok()
            })
            .collect();
        checked.insert(key, CheckedAnswer { fits, json });
    }
    Ok(checked)
}

/// Records checked answers to `owner`'s task; `Ok(())` once recorded (or when the task waits
/// for nothing), "not found" for an unknown task, -32602 for an answer that does not fit or
/// exceeds the task's budget (`describe` names the answer for the message).
pub(super) async fn record(
    state: &AppState,
    task: &mcpgate_store::TaskId,
    owner: &str,
    answers: &CheckedAnswers,
    describe: impl Fn(&str) -> String,
) -> Result<(), GatewayError> {
    use mcpgate_store::TaskStore as _;
    let budget = state.config.tasks.max_task_answer_bytes;
    match state.store.answer(task, owner, answers, budget).await? {
        Answered::NotFound => Err(GatewayError::TaskNotFound { task: task.to_string() }),
        Answered::Invalid(key) => {
            Err(GatewayError::invalid_params(format!("{}: not a valid answer to the request it names", describe(&key))))
        }
        Answered::TooLarge(limit) => Err(GatewayError::invalid_params(format!(
            "the task's answers would exceed {limit} bytes (tasks.max_task_answer_bytes)"
        ))),
        Answered::NotWaiting(_) | Answered::Waiting(_) | Answered::Resumed => Ok(()),
    }
}
