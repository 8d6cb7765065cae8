//! Ranking, the two tools' definitions and arguments, and the catalog's filtered search.

use std::sync::Arc;

use serde_json::{Value, json};

use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::result::CacheScope;
use mcpgate_protocol::tool::{CallToolResult, Tool as ToolInfo};
use mcpgate_protocol::{Era, JsonObject};

use super::*;
use crate::catalog::{
    BoxFuture, CatalogBuilder, FnTool, ListRendering, Outcome, PersonalTools, TaskPolicy, Tool, ToolResolver,
};

/// (upstream, exposed name, title, description): a federated catalog as an agent meets it.
const TOOLS: &[(Option<&str>, &str, Option<&str>, &str)] = &[
    (Some("github"), "github_create_issue", Some("Create issue"), "Create a new issue in a GitHub repository."),
    (
        Some("github"),
        "github_list_issues",
        None,
        "List issues in a GitHub repository, with filters for state and labels.",
    ),
    (Some("github"), "github_get_issue", None, "Get the details of one issue of a GitHub repository."),
    (Some("github"), "github_update_issue", None, "Update the title, body, state or labels of an existing issue."),
    (Some("github"), "github_add_issue_comment", None, "Add a comment to an existing issue."),
    (Some("github"), "github_create_pull_request", None, "Create a new pull request in a GitHub repository."),
    (Some("github"), "github_list_pull_requests", None, "List and filter repository pull requests."),
    (Some("github"), "github_merge_pull_request", None, "Merge a pull request."),
    (Some("github"), "github_search_repositories", None, "Search for GitHub repositories."),
    (Some("github"), "github_create_repository", None, "Create a new GitHub repository in your account."),
    (Some("github"), "github_get_file_contents", None, "Get the contents of a file or directory from a repository."),
    (Some("github"), "github_push_files", None, "Push several files to a repository in one commit."),
    (Some("github"), "github_create_branch", None, "Create a new branch in a GitHub repository."),
    (Some("github"), "github_list_commits", None, "Get the list of commits of a branch."),
    (Some("github"), "github_search_code", None, "Search for code across GitHub repositories."),
    (Some("everything"), "everything_echo", None, "Echoes back the input."),
    (Some("everything"), "everything_add", None, "Adds two numbers."),
    (
        Some("everything"),
        "everything_longRunningOperation",
        None,
        "Demonstrates a long running operation with progress updates.",
    ),
    (
        Some("everything"),
        "everything_printEnv",
        None,
        "Prints all environment variables, helpful for debugging MCP server configuration.",
    ),
    (Some("everything"), "everything_sampleLLM", None, "Samples from an LLM using MCP's sampling feature."),
    (Some("everything"), "everything_getTinyImage", None, "Returns the MCP_TINY_IMAGE."),
    (
        Some("everything"),
        "everything_annotatedMessage",
        None,
        "Demonstrates how annotations can be used to provide metadata about content.",
    ),
    (Some("jira"), "jira_create_issue", Some("Create Jira ticket"), "Create a Jira issue in a project."),
    (Some("jira"), "jira_search_issues", None, "Search Jira issues with JQL."),
    (Some("jira"), "jira_transition_issue", None, "Move a Jira issue to another status."),
    (Some("slack"), "slack_post_message", None, "Post a message to a Slack channel."),
    (Some("slack"), "slack_list_channels", None, "List the public channels of the workspace."),
    (Some("slack"), "slack_send_dm", Some("Direct message"), "Sends a direct message to one user."),
    (Some("slack"), "slack_get_thread_replies", None, "Get all replies in a message thread."),
    (None, "fetch", None, "Fetches a URL from the internet and extracts its contents as markdown."),
];

fn descriptor(upstream: Option<&str>, name: &str, title: Option<&str>, description: &str) -> ToolDescriptor {
    let mut d = ToolDescriptor::new(name, description, json!({"type": "object"}));
    if let Some(title) = title {
        d = d.title(title);
    }
    d.upstream = upstream.map(Arc::from);
    d
}

fn infos() -> Vec<ToolInfo> {
    TOOLS.iter().map(|&(u, n, t, d)| descriptor(u, n, t, d).info).collect()
}

fn ranked(query: &str, limit: usize) -> Vec<String> {
    let tools = infos();
    rank(query, &tools, limit).into_iter().map(|t| t.name.clone()).collect()
}

fn fn_tool(d: ToolDescriptor) -> FnTool {
    FnTool::new(d, |_, _| Outcome::Complete(CallToolResult::default()))
}

fn rendering() -> ListRendering {
    ListRendering {
        server_info: Arc::new(Implementation::new("mcpgate", "test")),
        ttl_ms: 60_000,
        cache_scope: CacheScope::Public,
        legacy_task_support: true,
    }
}

fn catalog_with(extra: impl FnOnce(&mut CatalogBuilder)) -> Catalog {
    let mut builder = CatalogBuilder::default();
    for &(u, n, t, d) in TOOLS {
        builder.tool(fn_tool(descriptor(u, n, t, d)));
    }
    extra(&mut builder);
    builder.build(&rendering()).expect("a valid catalog")
}

fn names(tools: &[ToolInfo]) -> Vec<&str> {
    tools.iter().map(|t| t.name.as_str()).collect()
}

fn anyone() -> Principal {
    Principal::new("https://issuer.example/", "alice", Vec::new())
}

#[test]
fn tokens_split_on_separators_and_camel_case_in_lowercase() {
    assert_eq!(tokenize("github_create-issue.v2"), ["github", "create", "issue", "v2"]);
    assert_eq!(tokenize("everything_getTinyImage"), ["everything", "get", "tiny", "image"]);
    assert_eq!(tokenize("HTTPServer ipv4Address sampleLLM"), ["http", "server", "ipv4", "address", "sample", "llm"]);
    assert_eq!(tokenize("Échoue  à l'ÉCOLE!"), ["échoue", "à", "l", "école"]);
    assert!(tokenize(" _-.!? ").is_empty());
}

#[test]
fn both_query_words_in_the_name_come_first_ties_by_name() {
    let found = ranked("create issue", 50);
    assert_eq!(found[..2], ["github_create_issue", "jira_create_issue"], "{found:?}");
    // Then the tools with one of the two words in their name.
    assert!(found[2..].contains(&"github_create_branch".to_owned()), "{found:?}");
    assert!(found[2..].contains(&"jira_transition_issue".to_owned()), "{found:?}");
}

#[test]
fn the_exact_name_wins_over_any_token_matches() {
    assert_eq!(ranked("everything_echo", 3)[0], "everything_echo");
    assert_eq!(ranked("GitHub_List_Issues", 3)[0], "github_list_issues");
    // The name's words in order count as the name.
    assert_eq!(ranked("jira search issues", 3)[0], "jira_search_issues");
    // One word naming a whole tool beats tools that have it and more in name and description.
    let tools = vec![
        descriptor(None, "echo_echo_server", Some("Echo"), "Echo echo echo.").info,
        descriptor(None, "echo", None, "Says it back.").info,
    ];
    assert_eq!(rank("echo", &tools, 5)[0].name, "echo");
}

#[test]
fn name_then_title_then_description() {
    // `message` is a name token of two tools, the title of one, and in one description only.
    assert_eq!(
        ranked("message", 10),
        ["everything_annotatedMessage", "slack_post_message", "slack_send_dm", "slack_get_thread_replies"]
    );
}

#[test]
fn a_description_only_match_ranks_last() {
    let found = ranked("repository", 50);
    assert_eq!(found[0], "github_create_repository", "{found:?}");
    let last = found.last().expect("matches");
    let info = infos().into_iter().find(|t| &t.name == last).expect("listed");
    assert!(!info.name.contains("repositor"), "last is a description match, not {last}: {found:?}");
    // Plural found as a prefix of a name token, after the whole-token match, before descriptions.
    let plural = found.iter().position(|n| n == "github_search_repositories").expect("prefix match");
    let described = found.iter().position(|n| n == "github_push_files").expect("description match");
    assert!(0 < plural && plural < described, "{found:?}");
}

#[test]
fn prefixes_and_plurals_score_a_bit_less_than_whole_tokens() {
    let found = ranked("issue", 50);
    let whole = found.iter().position(|n| n == "jira_transition_issue").expect("whole");
    let plural = found.iter().position(|n| n == "github_list_issues").expect("plural");
    assert!(whole < plural, "{found:?}");
    let found = ranked("issues", 50);
    assert_eq!(found[..2], ["github_list_issues", "jira_search_issues"], "{found:?}");
    assert!(found.iter().any(|n| n == "github_create_issue"), "`issues` finds `issue`: {found:?}");
    assert!(ranked("echoing", 5).is_empty(), "`echoing` is another word than `echo`");
    assert_eq!(ranked("ech", 5), ["everything_echo"]);
}

#[test]
fn every_query_token_contributes() {
    // `search` alone ties three names; `code` picks one of them.
    assert_eq!(ranked("search code", 1), ["github_search_code"]);
    assert_eq!(ranked("search jira", 1), ["jira_search_issues"]);
}

#[test]
fn the_limit_is_respected_and_ties_go_by_name() {
    assert_eq!(ranked("github", 3), ["github_add_issue_comment", "github_create_branch", "github_create_issue"]);
    assert_eq!(ranked("github", 50).len(), 15);
    assert!(ranked("github", 0).is_empty());
}

#[test]
fn no_match_gives_nothing() {
    assert!(ranked("kubernetes", 10).is_empty());
    assert!(ranked("   ", 10).is_empty());
    assert!(ranked("!?-_.", 10).is_empty());
}

#[test]
fn stop_words_only_count_when_nothing_else_is_asked() {
    assert_eq!(ranked("create an issue in the jira", 1), ["jira_create_issue"]);
    // `the` alone still searches (descriptions only).
    assert!(!ranked("the", 50).is_empty());
}

#[test]
fn a_hostile_query_is_bounded() {
    // 10 KB: only the first MAX_QUERY_CHARS characters count, and repeats count once.
    let long = "echo ".repeat(2048);
    assert_eq!(long.len(), 10_240);
    assert_eq!(ranked(&long, 10), ["everything_echo"]);
    let far = format!("{}echo", "x".repeat(MAX_QUERY_CHARS));
    assert!(ranked(&far, 10).is_empty(), "a word past the first {MAX_QUERY_CHARS} characters does not count");
    // Many distinct tokens: only the first MAX_QUERY_TOKENS count.
    let many: Vec<String> = (0..100).map(|i| format!("zz{i}")).collect();
    let late = format!("{} echo", many.join(" "));
    assert!(ranked(&late, 10).is_empty(), "the 101st token is ignored");
    let early = format!("{} echo", many[..MAX_QUERY_TOKENS - 1].join(" "));
    assert_eq!(ranked(&early, 10), ["everything_echo"], "the 16th token counts");
    // Unicode: multi-byte characters across the bound, emoji, combining marks, right-to-left.
    for query in ["é".repeat(10_000), "🦀".repeat(3000), "e\u{301}cho ".repeat(500), "مرحبا ".repeat(400)] {
        let _ = ranked(&query, 10);
    }
    assert_eq!(ranked("ECHO🦀", 10), ["everything_echo"]);
    // A huge description is read up to a bound, and still found by its start.
    let tools = vec![descriptor(None, "big", None, &format!("needle {}", "hay ".repeat(100_000))).info];
    assert_eq!(rank("needle", &tools, 1).len(), 1);
    let tools = vec![descriptor(None, "big", None, &format!("{} needle", "hay ".repeat(100_000))).info];
    assert!(rank("needle", &tools, 1).is_empty(), "a description is read up to {MAX_FIELD_BYTES} bytes");
}

#[test]
fn ranking_is_deterministic_whatever_the_input_order() {
    let mut tools = infos();
    let forward: Vec<String> = rank("create issue github", &tools, 50).into_iter().map(|t| t.name.clone()).collect();
    tools.reverse();
    let backward: Vec<String> = rank("create issue github", &tools, 50).into_iter().map(|t| t.name.clone()).collect();
    assert_eq!(forward, backward);
}

#[test]
fn the_two_definitions() {
    let [search, call] = definitions();
    assert_eq!(search.name, SEARCH_TOOLS);
    assert_eq!(call.name, CALL_TOOL);
    let search = serde_json::to_value(&search).expect("json");
    assert_eq!(search["inputSchema"]["required"], json!(["query"]));
    assert_eq!(search["inputSchema"]["properties"]["query"]["maxLength"], 256);
    assert_eq!(search["inputSchema"]["properties"]["limit"]["maximum"], 50);
    assert_eq!(search["inputSchema"]["properties"]["limit"]["default"], 10);
    assert_eq!(search["annotations"]["readOnlyHint"], true);
    assert!(search["description"].as_str().unwrap().contains("call_tool"));
    let call = serde_json::to_value(&call).expect("json");
    assert_eq!(call["inputSchema"]["required"], json!(["name"]));
    assert_eq!(call["inputSchema"]["properties"]["arguments"]["type"], "object");
    assert!(call.get("annotations").is_none(), "call_tool does whatever the called tool does");
    assert!(is_reserved("search_tools") && is_reserved("call_tool") && !is_reserved("search"));
}

fn args(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => panic!("an object"),
    }
}

fn invalid(failure: Failure) -> String {
    match failure {
        Failure::InvalidParams(message) | Failure::InvalidArguments(message) => message,
        other => panic!("invalid params, got {other:?}"),
    }
}

#[test]
fn search_arguments() {
    let parsed = SearchRequest::parse(Some(&args(json!({"query": "create issue"})))).expect("valid");
    assert_eq!(parsed, SearchRequest { query: "create issue".into(), limit: 10 });
    let parsed = SearchRequest::parse(Some(&args(json!({"query": "x", "limit": 50, "other": 1})))).expect("valid");
    assert_eq!(parsed.limit, 50);
    assert!(SearchRequest::parse(Some(&args(json!({"query": "é".repeat(256)})))).is_ok(), "characters, not bytes");
    let cases = [
        (None, "`query` is required"),
        (Some(json!({"limit": 5})), "`query` is required"),
        (Some(json!({"query": 5})), "`query` must be a string, not a number"),
        (Some(json!({"query": " \t"})), "`query` is empty"),
        (Some(json!({"query": "x".repeat(257)})), "longer than 256 characters"),
        (Some(json!({"query": "x", "limit": 0})), "from 1 to 50, not 0"),
        (Some(json!({"query": "x", "limit": 51})), "not 51"),
        (Some(json!({"query": "x", "limit": 2.5})), "not 2.5"),
        (Some(json!({"query": "x", "limit": "3"})), "not a string"),
        (Some(json!({"query": "x", "limit": -1})), "not -1"),
    ];
    for (arguments, expected) in cases {
        let arguments = arguments.map(args);
        let message = invalid(SearchRequest::parse(arguments.as_ref()).expect_err("invalid"));
        assert!(message.starts_with("search_tools: ") && message.contains(expected), "{message}");
    }
}

#[test]
fn call_arguments() {
    let parsed = CallRequest::parse(Some(args(json!({"name": "everything_echo", "arguments": {"message": "hi"}}))));
    assert_eq!(
        parsed.expect("valid"),
        CallRequest { name: "everything_echo".into(), arguments: Some(args(json!({"message": "hi"}))) }
    );
    let parsed = CallRequest::parse(Some(args(json!({"name": "fetch", "arguments": null})))).expect("valid");
    assert_eq!(parsed.arguments, None);
    assert_eq!(CallRequest::parse(Some(args(json!({"name": "fetch"})))).expect("valid").arguments, None);
    let cases = [
        (None, "`name` is required"),
        (Some(json!({"arguments": {}})), "`name` is required"),
        (Some(json!({"name": ""})), "`name` is empty"),
        (Some(json!({"name": ["a"]})), "`name` must be a string, not an array"),
        (Some(json!({"name": "fetch", "arguments": "{}"})), "`arguments` must be an object, not a string"),
        (Some(json!({"name": "fetch", "arguments": [1]})), "`arguments` must be an object, not an array"),
        (Some(json!({"name": "call_tool", "arguments": {}})), "cannot be call_tool"),
        (Some(json!({"name": "search_tools"})), "cannot be search_tools"),
    ];
    for (arguments, expected) in cases {
        let message = invalid(CallRequest::parse(arguments.map(args)).expect_err("invalid"));
        assert!(message.starts_with("call_tool: ") && message.contains(expected), "{message}");
    }
}

#[test]
fn the_result_holds_full_definitions_structured_and_as_text() {
    let tools = infos();
    let found: Vec<ToolInfo> = rank("echo", &tools, 10).into_iter().cloned().collect();
    let result = serde_json::to_value(search_result(&found).expect("renders")).expect("json");
    let structured = &result["structuredContent"];
    assert_eq!(structured["tools"][0]["name"], "everything_echo");
    assert_eq!(structured["tools"][0]["inputSchema"], json!({"type": "object"}));
    assert_eq!(structured["tools"][0]["description"], "Echoes back the input.");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().expect("text")).expect("json text");
    assert_eq!(&text, structured);
    assert!(result.get("isError").is_none());
    let empty = serde_json::to_value(search_result(&[]).expect("renders")).expect("json");
    assert_eq!(empty["structuredContent"], json!({"tools": []}));
}

#[tokio::test]
async fn the_catalog_search_obeys_the_shows_filter() {
    let catalog = catalog_with(|_| {});
    let everyone = catalog.search_where(Era::Modern, &anyone(), "create issue", 10, &|_, _| true).await;
    assert_eq!(names(&everyone)[..2], ["github_create_issue", "jira_create_issue"]);
    let no_jira = |_: &str, upstream: Option<&str>| upstream != Some("jira");
    let found = catalog.search_where(Era::Modern, &anyone(), "create issue", 50, &no_jira).await;
    assert!(!found.is_empty() && found.iter().all(|t| !t.name.starts_with("jira_")), "{:?}", names(&found));
    let not_echo = |name: &str, _: Option<&str>| name != "everything_echo";
    assert!(
        catalog
            .search_where(Era::Modern, &anyone(), "everything_echo", 50, &not_echo)
            .await
            .iter()
            .all(|t| t.name != "everything_echo")
    );
}

#[tokio::test]
async fn reserved_names_are_never_found() {
    let catalog = catalog_with(|b| {
        b.tool(fn_tool(descriptor(Some("x"), "search_tools", None, "An upstream's own search tools.")));
    });
    let found = catalog.search_where(Era::Modern, &anyone(), "search tools", 50, &|_, _| true).await;
    assert!(!found.is_empty() && found.iter().all(|t| t.name != "search_tools"), "{:?}", names(&found));
}

#[tokio::test]
async fn definitions_are_rendered_for_the_callers_era() {
    let catalog = catalog_with(|b| {
        b.tool(fn_tool(descriptor(None, "report_build", None, "Builds a report.").task_policy(TaskPolicy::Optional)));
    });
    let legacy = catalog.search_where(Era::Legacy, &anyone(), "report", 1, &|_, _| true).await;
    let legacy = serde_json::to_value(&legacy[0]).expect("json");
    assert_eq!(legacy["execution"]["taskSupport"], "optional");
    let modern = catalog.search_where(Era::Modern, &anyone(), "report", 1, &|_, _| true).await;
    assert!(serde_json::to_value(&modern[0]).expect("json").get("execution").is_none());
}

#[test]
fn the_search_servers_list_holds_the_two_tools() {
    let catalog = catalog_with(|_| {});
    for era in [Era::Modern, Era::Legacy] {
        let list: Value = serde_json::from_slice(&catalog.search_tools_list(era).expect("renders")).expect("json");
        let names: Vec<&str> =
            list["tools"].as_array().expect("tools").iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["search_tools", "call_tool"]);
    }
}

/// Shows `alice` her own `files_*` tools in place of the `files_connect` stand-in; nobody else.
struct AliceFiles;

impl ToolResolver for AliceFiles {
    fn resolve<'a>(&'a self, _: &'a str, _: &'a Principal) -> BoxFuture<'a, Option<Arc<dyn Tool>>> {
        Box::pin(async { None })
    }

    fn personal<'a>(&'a self, principal: &'a Principal) -> BoxFuture<'a, PersonalTools> {
        Box::pin(async move {
            if principal.subject() != "alice" {
                return PersonalTools::default();
            }
            let own: Arc<dyn Tool> = Arc::new(fn_tool(descriptor(
                Some("files"),
                "files_read_document",
                None,
                "Reads one of your documents.",
            )));
            PersonalTools { replaced: vec![("files_connect".to_owned(), vec![own])], ttl_ms: None }
        })
    }
}

#[tokio::test]
async fn a_principals_own_tools_are_searched_in_place_of_the_stand_in() {
    let catalog = catalog_with(|b| {
        b.tool(fn_tool(descriptor(Some("files"), "files_connect", None, "Connect your documents account.")));
        b.resolver(Arc::new(AliceFiles));
    });
    let alice = catalog.search_where(Era::Modern, &anyone(), "documents", 10, &|_, _| true).await;
    assert_eq!(names(&alice), ["files_read_document"]);
    let bob = Principal::new("https://issuer.example/", "bob", Vec::new());
    let bob = catalog.search_where(Era::Modern, &bob, "documents", 10, &|_, _| true).await;
    assert_eq!(names(&bob), ["files_connect"]);
    let hidden = |_: &str, upstream: Option<&str>| upstream != Some("files");
    assert!(catalog.search_where(Era::Modern, &anyone(), "documents", 10, &hidden).await.is_empty());
}
