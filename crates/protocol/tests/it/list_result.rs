//! `ListResult<T>` is written and read exactly as the four per-list structs it replaced: each
//! list is checked against a copy of its old derived struct, byte for byte.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::json;

use mcpgate_protocol::implementation::Implementation;
use mcpgate_protocol::pagination::ListResult;
use mcpgate_protocol::prompt::{ListPromptsResult, Prompt};
use mcpgate_protocol::resource::{ListResourceTemplatesResult, ListResourcesResult, Resource, ResourceTemplate};
use mcpgate_protocol::result::{CacheScope, ResultMeta, ResultType};
use mcpgate_protocol::tool::{ListToolsResult, Tool};

/// The struct each list result used to be (as derived before `ListResult`).
macro_rules! before {
    ($name:ident, $item:ty, $member:literal) => {
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct $name {
            #[serde(rename = $member)]
            items: Vec<$item>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            next_cursor: Option<String>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            ttl_ms: Option<u64>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            cache_scope: Option<CacheScope>,
            #[serde(default, skip_serializing_if = "Option::is_none")]
            result_type: Option<ResultType>,
            #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
            meta: Option<ResultMeta>,
        }

        impl From<ListResult<$item>> for $name {
            fn from(r: ListResult<$item>) -> Self {
                Self {
                    items: r.items,
                    next_cursor: r.next_cursor,
                    ttl_ms: r.ttl_ms,
                    cache_scope: r.cache_scope,
                    result_type: r.result_type,
                    meta: r.meta,
                }
            }
        }
    };
}

before!(BeforeTools, Tool, "tools");
before!(BeforePrompts, Prompt, "prompts");
before!(BeforeResources, Resource, "resources");
before!(BeforeTemplates, ResourceTemplate, "resourceTemplates");

fn tool() -> Tool {
    serde_json::from_value(json!({"name": "echo", "inputSchema": {"type": "object"}})).expect("tool")
}

fn prompt() -> Prompt {
    serde_json::from_value(json!({"name": "greet", "arguments": [{"name": "who", "required": true}]})).expect("prompt")
}

fn resource() -> Resource {
    serde_json::from_value(json!({"uri": "test://a", "name": "a", "mimeType": "text/plain"})).expect("resource")
}

fn template() -> ResourceTemplate {
    serde_json::from_value(json!({"uriTemplate": "test://t/{id}", "name": "t"})).expect("template")
}

/// Every way a page can be filled: bare, and with every optional member set.
fn pages<T: Clone>(item: T) -> Vec<ListResult<T>> {
    let full = ListResult {
        items: vec![item.clone(), item],
        next_cursor: Some("c2".to_owned()),
        ttl_ms: Some(60_000),
        cache_scope: Some(CacheScope::Private),
        result_type: Some(ResultType::Complete),
        meta: Some(ResultMeta::server(Arc::new(Implementation::new("mcpgate", "0.1.0")))),
    };
    vec![ListResult::default(), ListResult { ttl_ms: Some(0), ..ListResult::default() }, full]
}

/// Serializing agrees byte for byte; reading agrees on good input and on what is refused.
fn same_wire<T, B>(item: T, member: &str)
where
    T: Clone + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned + mcpgate_protocol::pagination::Listed,
    B: From<ListResult<T>> + std::fmt::Debug + PartialEq + Serialize + DeserializeOwned,
{
    for page in pages(item.clone()) {
        let now = serde_json::to_string(&page).expect("serializes");
        let before = serde_json::to_string(&B::from(page.clone())).expect("serializes");
        assert_eq!(now, before, "{member}: written differently");
        let read: ListResult<T> = serde_json::from_str(&before).expect("reads what the old struct wrote");
        assert_eq!(read, page, "{member}: does not round-trip");
    }
    let item = serde_json::to_value(&item).expect("item");
    let inputs = [
        json!({member: [item.clone()], "nextCursor": null, "ttlMs": null, "unknown": {"x": 1}}),
        json!({member: [], "cacheScope": "public", "resultType": "some_extension_value"}),
        json!({member: [item.clone()], "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}, "k": 1}}),
        json!({"nextCursor": "c"}),
        json!({member: [item.clone()], "nextCursor": "a", "nextCursor": "b"}),
        json!({member: null}),
        json!({member: [item], "ttlMs": -1}),
        json!({member: [{"not": "an item"}]}),
        json!([]),
        json!("tools"),
    ];
    for input in inputs {
        let now = serde_json::from_value::<ListResult<T>>(input.clone());
        let before = serde_json::from_value::<B>(input.clone());
        match (now, before) {
            (Ok(now), Ok(before)) => assert_eq!(B::from(now), before, "{member}: {input} read differently"),
            (Err(_), Err(_)) => {}
            (now, before) => panic!("{member}: {input}: now {now:?}, before {before:?}"),
        }
    }
    // A JSON text with a duplicate member (serde_json::Value cannot hold one).
    let duplicate = format!(r#"{{"{member}": [], "{member}": []}}"#);
    assert!(serde_json::from_str::<ListResult<T>>(&duplicate).is_err(), "{member}: duplicate accepted");
    assert!(serde_json::from_str::<B>(&duplicate).is_err());
}

#[test]
fn every_list_result_keeps_its_wire_shape() {
    same_wire::<Tool, BeforeTools>(tool(), "tools");
    same_wire::<Prompt, BeforePrompts>(prompt(), "prompts");
    same_wire::<Resource, BeforeResources>(resource(), "resources");
    same_wire::<ResourceTemplate, BeforeTemplates>(template(), "resourceTemplates");
}

#[test]
fn the_aliases_name_their_member() {
    let tools = serde_json::to_value(ListToolsResult::new(vec![tool()])).expect("tools");
    assert_eq!(tools["tools"][0]["name"], "echo");
    let prompts = serde_json::to_value(ListPromptsResult::new(vec![prompt()])).expect("prompts");
    assert_eq!(prompts["prompts"][0]["name"], "greet");
    let resources = serde_json::to_value(ListResourcesResult::new(vec![resource()])).expect("resources");
    assert_eq!(resources["resources"][0]["uri"], "test://a");
    let templates = serde_json::to_value(ListResourceTemplatesResult::new(vec![template()])).expect("templates");
    assert_eq!(templates["resourceTemplates"][0]["uriTemplate"], "test://t/{id}");
    assert_eq!(serde_json::to_value(ListToolsResult::default()).expect("empty"), json!({"tools": []}));
}
