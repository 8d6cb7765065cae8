//! Golden fixtures: every file under `tests/fixtures/<era>/` decodes into its type and
//! re-encodes to the same JSON. `UPDATE_FIXTURES=1` rewrites the files from the typed form.

use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use mcpgate_protocol::completion::{CompleteParams, CompleteResult};
use mcpgate_protocol::discover::DiscoverResult;
use mcpgate_protocol::error_code::ErrorObject;
use mcpgate_protocol::initialize::{InitializeParams, InitializeResult};
use mcpgate_protocol::input::InputRequiredResult;
use mcpgate_protocol::meta::RequestMeta;
use mcpgate_protocol::prompt::{GetPromptResult, ListPromptsResult};
use mcpgate_protocol::resource::{ListResourceTemplatesResult, ListResourcesResult, ReadResourceResult};
use mcpgate_protocol::result::EmptyResult;
use mcpgate_protocol::task::{
    CreateTaskResult, DetailedTask, LegacyCreateTaskResult, LegacyTaskResult, ListTasksResult, UpdateTaskParams,
};
use mcpgate_protocol::tool::{CallToolParams, CallToolResult, ListToolsResult};

fn fixture_dir(era: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(era)
}

fn round_trip<T: DeserializeOwned + Serialize>(era: &str, file: &str) {
    let path = fixture_dir(era).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let original: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
    let typed: T = serde_json::from_value(original.clone()).unwrap_or_else(|e| panic!("{era}/{file}: {e}"));
    let again = serde_json::to_value(&typed).expect("serializes");
    if std::env::var_os("UPDATE_FIXTURES").is_some() {
        let pretty = serde_json::to_string_pretty(&again).expect("serializes") + "\n";
        std::fs::write(&path, pretty).expect("fixture written");
        return;
    }
    assert_eq!(original, again, "{era}/{file} does not round-trip");
}

#[test]
fn modern_fixtures_round_trip() {
    let era = "2026-07-28";
    round_trip::<RequestMeta>(era, "request_meta.json");
    round_trip::<CallToolParams>(era, "call_tool_params.json");
    round_trip::<CallToolResult>(era, "call_tool_result.json");
    round_trip::<ListToolsResult>(era, "list_tools_result.json");
    round_trip::<DiscoverResult>(era, "discover_result.json");
    round_trip::<InputRequiredResult>(era, "input_required_result.json");
    round_trip::<InputRequiredResult>(era, "input_required_all_kinds.json");
    round_trip::<CreateTaskResult>(era, "create_task_result.json");
    round_trip::<DetailedTask>(era, "detailed_task_completed.json");
    round_trip::<DetailedTask>(era, "detailed_task_failed.json");
    round_trip::<DetailedTask>(era, "detailed_task_input_required.json");
    round_trip::<UpdateTaskParams>(era, "update_task_params.json");
    round_trip::<GetPromptResult>(era, "get_prompt_result.json");
    round_trip::<ListPromptsResult>(era, "list_prompts_result.json");
    round_trip::<ReadResourceResult>(era, "read_resource_result.json");
    round_trip::<ListResourcesResult>(era, "list_resources_result.json");
    round_trip::<ListResourceTemplatesResult>(era, "list_resource_templates_result.json");
    round_trip::<CompleteParams>(era, "complete_params.json");
    round_trip::<CompleteResult>(era, "complete_result.json");
    round_trip::<ErrorObject>(era, "error_unsupported_version.json");
    round_trip::<ErrorObject>(era, "error_missing_capability.json");
    round_trip::<EmptyResult>(era, "empty_result.json");
}

#[test]
fn legacy_fixtures_round_trip() {
    let era = "2025-11-25";
    round_trip::<InitializeParams>(era, "initialize_params.json");
    round_trip::<InitializeResult>(era, "initialize_result.json");
    round_trip::<CallToolParams>(era, "call_tool_params_task.json");
    round_trip::<LegacyCreateTaskResult>(era, "create_task_result.json");
    round_trip::<LegacyTaskResult>(era, "task_result.json");
    round_trip::<ListTasksResult>(era, "list_tasks_result.json");
    round_trip::<ListToolsResult>(era, "list_tools_result.json");
    round_trip::<CallToolResult>(era, "call_tool_result.json");
}

#[test]
fn every_fixture_file_is_exercised() {
    // A fixture added without a round-trip line would silently test nothing.
    let source = include_str!("golden.rs");
    for era in ["2026-07-28", "2025-11-25"] {
        for entry in std::fs::read_dir(fixture_dir(era)).expect("fixture dir") {
            let name = entry.expect("entry").file_name().into_string().expect("utf-8 name");
            assert!(source.contains(&format!("\"{name}\"")), "{era}/{name} is not round-tripped");
        }
    }
}

#[test]
fn typed_fields_carry_the_meaning() {
    let text = std::fs::read_to_string(fixture_dir("2026-07-28").join("request_meta.json")).expect("fixture");
    let meta: RequestMeta = serde_json::from_str(&text).expect("decodes");
    assert_eq!(meta.protocol_version.as_deref(), Some("2026-07-28"));
    let caps = meta.client_capabilities.expect("caps");
    assert!(caps.has_extension(mcpgate_protocol::capabilities::TASKS_EXTENSION));
    assert!(caps.elicitation_form() && caps.elicitation_url());

    let text = std::fs::read_to_string(fixture_dir("2025-11-25").join("call_tool_params_task.json")).expect("fixture");
    let params: CallToolParams = serde_json::from_str(&text).expect("decodes");
    assert_eq!(params.legacy_task().expect("valid").and_then(|t| t.ttl), Some(60_000));

    let text =
        std::fs::read_to_string(fixture_dir("2026-07-28").join("detailed_task_completed.json")).expect("fixture");
    let task: DetailedTask = serde_json::from_str(&text).expect("decodes");
    assert_eq!(task.task.ttl_ms, None, "null ttlMs means unlimited");
    assert!(task.task.status.is_terminal());
}

#[test]
fn ttl_null_is_always_rendered() {
    let text = std::fs::read_to_string(fixture_dir("2025-11-25").join("task_result.json")).expect("fixture");
    let task: LegacyTaskResult = serde_json::from_str(&text).expect("decodes");
    let json = serde_json::to_value(&task).expect("encodes");
    assert_eq!(json.get("ttl"), Some(&Value::Null), "both schemas require ttl even when unlimited");
}
